//! What the agent and the hub need to evaluate checks the same way: templates over the
//! MemberCluster in selector names and namespaces ([`template`]), the Kubernetes
//! label-selector string form and Sveltos label filters ([`labels`]), and resolving a
//! `ResourceSelector` into a query that picks objects ([`query`]).

pub mod labels;
pub mod lua_batch;
pub mod query;
pub mod template;

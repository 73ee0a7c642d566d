//! What the agent and the hub need to evaluate checks the same way: templates over the
//! MemberCluster in selector names and namespaces ([`template`]), the Kubernetes
//! label-selector string form and Sveltos label filters ([`labels`]), resolving a
//! `ResourceSelector` into a query that picks objects ([`query`]), Sveltos' CEL filter
//! ([`cel`]), Lua checks in shared rounds ([`lua_batch`]), the typed check the engines
//! run ([`model`]), a check's verdict over time ([`timing`]), the rules of the schema
//! applied where no API server enforces them ([`validate`]), and the objects the agent's
//! watch-fed cache holds for Lua rounds ([`store`]).

pub mod cel;
pub mod labels;
pub mod lua_batch;
pub mod model;
pub mod query;
pub mod store;
pub mod template;
pub mod timing;
pub mod validate;

/// The outcome of one run of one check, before thresholds are applied.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    /// Whether this run passed.
    pub passing: bool,
    /// What the run found, or why it failed.
    pub message: String,
    /// Success rate over the check's window, for pod checks.
    pub success_rate_percent: Option<f64>,
}

impl RunOutcome {
    /// A passing run.
    pub fn pass(message: impl Into<String>) -> Self {
        Self {
            passing: true,
            message: message.into(),
            success_rate_percent: None,
        }
    }

    /// A failing run.
    pub fn fail(message: impl Into<String>) -> Self {
        Self {
            passing: false,
            message: message.into(),
            success_rate_percent: None,
        }
    }
}

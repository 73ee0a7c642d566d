//! Kubernetes mode: the hub's objects come from watching its CRDs on the management
//! cluster ([`source`]), and its state is written back as their status ([`store`]). The
//! decisions are the same code as the embedded mode; only the store and the object source
//! differ. HealthPolicy status is written after each reload ([`policy_status`]).

pub mod events;
pub mod hub_objects;
pub mod leader;
pub mod policy_status;
pub mod shard_leases;
pub mod source;
pub mod store;

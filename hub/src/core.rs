//! The hub's decisions, as pure functions and state machines over data: no I/O, no clock
//! of their own (every input carries `now`), and no import of tokio, kube, rusqlite,
//! axum, hyper or reqwest (a test reads these files to keep it so). The fleet
//! ([`crate::fleet`]) feeds them and carries out what they decide.
//!
//! - [`detector`]: whether a cluster's heartbeats stopped (fixed timeout or phi accrual).
//! - [`health`]: the `Reachable`, `Ready` and `Healthy` conditions with their debounce.
//! - [`selection`]: which clusters a ClusterSet or Set selects.
//! - [`brake`]: the partition brake, which freezes reassignment when most clusters go
//!   quiet at once.
//! - [`rollout`]: the rollout brake, which holds clusters a bad change of checks turned
//!   unhealthy.
//! - [`shared_key`]: whether two running agents sign with one cluster's key.

pub mod brake;
pub mod detector;
pub mod health;
pub mod rollout;
pub mod selection;
pub mod shared_key;

//! The hub's decisions, as pure functions and state machines over data: no I/O, no clock
//! of their own (every input carries `now`), and no import of tokio, kube, rusqlite,
//! axum, hyper or reqwest (a test reads these files to keep it so). The fleet
//! ([`crate::fleet`]) feeds them and carries out what they decide.
//!
//! - [`cluster`]: what a heartbeat and a detector tick do to one cluster.
//! - [`digest`]: digests that tell a repeated message or report from a changed one.
//! - [`detector`]: whether a cluster's heartbeats stopped (fixed timeout or phi accrual).
//! - [`fleet`]: the whole fleet's decisions as one state machine, events in and effects
//!   out, composing the others as the fleet does.
//! - [`repeat`]: a report's text read as the last accepted one with new position and
//!   times, without a parse.
//! - [`health`]: the `Reachable`, `Ready` and `Healthy` conditions with their debounce.
//! - [`selection`]: which clusters a ClusterSet or Set selects.
//! - [`sets`]: every set's next status, kept between evaluations.
//! - [`brake`]: the partition brake, which freezes reassignment when most clusters go
//!   quiet at once.
//! - [`rollout`]: the rollout brake, which holds clusters a bad change of checks turned
//!   unhealthy.
//! - [`shared_key`]: whether two running agents sign with one cluster's key.

pub mod brake;
pub mod cluster;
pub mod detector;
pub mod digest;
pub mod fleet;
pub mod health;
pub mod repeat;
pub mod rollout;
pub mod selection;
pub mod sets;
pub mod shared_key;

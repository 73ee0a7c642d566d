//! fleetpulse-hub: verifies signed heartbeats from agents, detects failed clusters, keeps
//! each cluster's health, and serves it on a read API.
//!
//! - [`detector`], [`health`], [`selection`], [`brake`]: the pure decisions (failure
//!   detector, health state machine, set selection, partition brake).
//! - [`fleet`]: desired state plus per-cluster runtime state.
//! - [`ingest`]: the HTTP API (heartbeats, config, read API, probes).
//! - [`store`]: durable state (embedded SQLite).
//! - [`metrics`]: Prometheus metrics.
//! - [`mirrors`]: health and membership projected onto other tools' cluster objects.
//! - [`embedded`]: reading manifests from a directory, the default mode.
//! - [`kubernetes`]: the Kubernetes mode: CRDs watched, status written back.
//! - [`server`]: listeners, TLS, and the [`server::Hub`] that ties it all together.
//! - [`cli`]: the command line (`serve`, `crds`, `get`).
#![forbid(unsafe_code)]

pub mod brake;
pub mod cli;
pub mod detector;
pub mod embedded;
pub mod fleet;
pub mod health;
pub mod ingest;
pub mod kubernetes;
pub mod metrics;
pub mod mirrors;
pub mod selection;
pub mod server;
pub mod store;

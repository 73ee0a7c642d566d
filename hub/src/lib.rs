//! fleetpulse-hub: verifies signed heartbeats from agents, detects failed clusters, keeps
//! each cluster's health, and serves it on a read API.
//!
//! - [`core`]: the pure decisions (failure detector, health state machine, set
//!   selection, partition brake).
//! - [`ids`]: the identities (`ClusterId`, `SetKey`) every part imports.
//! - [`shards`]: the fleet cut into shards owned by hub replicas through Leases, and the
//!   pure balancer deciding which shards a replica holds.
//! - [`fleet`]: desired state plus per-cluster runtime state.
//! - [`admission`]: the one pipeline every agent request passes (size to replay).
//! - [`ingest`]: the HTTP API (heartbeats, config, read API, probes), glue around it.
//! - [`console`]: the read-only web console on the admin listener, and its live stream.
//! - [`limiter`]: fixed-window limits per key, and the per-source limit on
//!   authentication failures both listeners share.
//! - [`store`]: durable state (embedded SQLite).
//! - [`metrics`]: Prometheus metrics.
//! - [`enrolment`]: bootstrap tokens, registration and rotation of agent keys.
//! - [`mirrors`]: health and membership projected onto other tools' cluster objects.
//! - [`adoption`]: MemberClusters made from the cluster objects of other tools.
//! - [`embedded`]: reading manifests from a directory, the default mode.
//! - [`kubernetes`]: the Kubernetes mode: CRDs watched, status written back.
//! - [`server`]: listeners, TLS, and the [`server::Hub`] that ties it all together.
//! - [`cli`]: the command line (`serve`, `crds`, `get`).
//! - `testing` (feature `testing`): test doubles and fixtures shared by the tests.
#![forbid(unsafe_code)]

pub mod admission;
pub mod adoption;
pub mod cli;
pub mod console;
pub mod core;
pub mod embedded;
pub mod enrolment;
pub mod fleet;
pub mod ids;
pub mod ingest;
pub mod kubernetes;
pub mod limiter;
pub mod metrics;
pub mod mirrors;
pub mod refusal;
pub mod server;
pub mod shards;
pub mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

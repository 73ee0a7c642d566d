//! fleetpulse-tests: fixtures for end-to-end tests and the no-cluster demo.
//!
//! - [`admin_api`]: a GET against a hub listener, with or without a bearer token.
//! - [`browser`]: headless Chromium over WebDriver, for the console's test.
//! - [`pki`]: a throwaway CA and a hub certificate for loopback HTTPS.
//! - [`detection_sim`]: the failure-detection simulator behind `detection-sim`.
//! - [`fault_proxy`]: a loopback TCP proxy that delays, drops, blackholes and resets.
//! - [`embedded_hub`]: the real `fleetpulse-hub serve` (embedded mode) as a child process.
//! - [`fleet`]: a fleet on disk: manifests of MemberClusters with freshly generated agent
//!   keys, ready for an embedded hub.
//! - [`hand_agent`]: one cluster's agent driven by hand: signed, skewed or forged requests.
//! - [`kube_fleet`]: the real hub (Kubernetes mode) and agents against simulated
//!   management and member clusters, for multi-cluster end-to-end scenarios.
//! - [`loadgen`]: the load generator behind the `loadgen` binary (docs/performance.md).
//! - [`management`]: a simulated management cluster for an in-process hub in Kubernetes mode.
//! - [`mirror_objects`]: the objects of the tools fleetpulse mirrors onto, and their test CRDs.
//! - [`process`]: the real binaries as child processes.
//! - [`scenario`]: an embedded hub plus agents on loopback, driven like an operator would.
//! - [`service`]: a Service stand-in routing to whichever hub replica is ready.
//! - [`write_amplification`]: the hub's Kubernetes API writes over a simulated hour.
//! - [`wait`]: waiting for a condition with a deadline instead of sleeping.
#![forbid(unsafe_code)]

pub mod admin_api;
pub mod browser;
pub mod detection_sim;
pub mod embedded_hub;
pub mod fault_proxy;
pub mod fleet;
pub mod hand_agent;
pub mod kube_fleet;
pub mod loadgen;
pub mod management;
pub mod mirror_objects;
pub mod pki;
pub mod process;
pub mod scenario;
pub mod service;
pub mod wait;
pub mod write_amplification;

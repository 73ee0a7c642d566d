//! fleetpulse-agent: runs in a managed cluster and pushes signed heartbeats to the hub.
//!
//! The agent never accepts connections: every interval it builds a [`HeartbeatReport`],
//! signs it with the cluster's Ed25519 key and POSTs it to the hub, backing off while the
//! hub is unreachable. The hub's answer sets the interval and tells the agent when to pull
//! its effective config (a signed `GET`).
//!
//! - [`runner`]: the heartbeat loop; [`run`] it until a token is cancelled, or [`spawn`]
//!   it and observe it through an [`AgentHandle`] (what the tests crate does).
//! - [`options`]: [`AgentOptions`], what one agent needs to run, and hub URL validation.
//! - [`report`]: building reports and config requests (pure: time is an argument).
//! - [`checks`]: the seam where the check engine plugs its results in.
//! - [`hub_client`]: the hub behind a small trait, with the reqwest implementation.
//! - [`tls`]: the rustls client configuration (pinned CA bundle or system roots).
//! - [`enrol`]: registering the key with a bootstrap token, over TLS to a pinned CA.
//! - [`keys`]: `keygen` and reading the private key file.
//! - [`key_secret`]: the key kept in a Secret when no key file is given; the cluster UID.
//! - [`serve`]: `--listen`: `/healthz`, `/readyz` and `/metrics` of the agent itself.
//! - [`cli`]: the command line (`keygen`, `run`), logging and signal handling.
//!
//! [`HeartbeatReport`]: fleetpulse_common::protocol::report::HeartbeatReport
#![forbid(unsafe_code)]

pub mod checks;
pub mod cli;
pub mod enrol;
pub mod error;
pub mod hub_client;
pub mod key_secret;
pub mod keys;
pub mod metrics;
pub mod options;
pub mod report;
pub mod rotation;
pub mod runner;
pub mod serve;
pub mod tls;

pub use error::AgentError;
pub use options::AgentOptions;
pub use reqwest::Url;
pub use runner::{AgentHandle, AgentStatus, run, spawn};

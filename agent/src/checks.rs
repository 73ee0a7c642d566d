//! The check engine and its seam with the heartbeat loop.
//!
//! The loop hands every newly pulled config to [`ChecksSource::apply_config`] and asks
//! [`ChecksSource::results`] for the current results each time it builds a report.
//! [`engine::CheckEngine`] runs the checks on their own schedule; [`NoChecks`] reports none
//! (an agent with no Kubernetes API and no config).
//!
//! - [`timing`]: the per-check verdict with thresholds and `for` (pure, shared with the hub).
//! - [`resources`]: reading objects for Lua checks and built-ins (Kubernetes or static).
//! - [`lua_check`]: Lua checks over a shared round of objects.
//! - [`offline`]: one evaluation against objects in memory (`eval`).
//! - [`builtin`]: the API server's `/readyz`, ready nodes, ready pods.
//! - [`probe`]: HTTP and TCP probes.
//! - [`pod`]: pod-based checks and their success-rate window.

pub mod builtin;
pub mod engine;
pub mod lua_check;
pub mod offline;
pub mod pod;
pub mod probe;
pub mod resources;

use fleetpulse_common::protocol::report::{AgentConfig, CheckResult};

pub use fleetpulse_common::checks::RunOutcome;
pub use fleetpulse_common::checks::timing;

/// Where a report's check results come from. Implementations must answer quickly: the
/// loop calls them on every report (checks run on their own schedule, elsewhere).
pub trait ChecksSource: Send + Sync + 'static {
    /// The latest result of every configured check, thresholds already applied.
    fn results(&self) -> Vec<CheckResult>;

    /// Called with each new effective config the agent pulled from the hub.
    fn apply_config(&self, config: &AgentConfig) {
        let _ = config;
    }
}

/// No checks: reports carry an empty list (their summary is ready and live).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoChecks;

impl ChecksSource for NoChecks {
    fn results(&self) -> Vec<CheckResult> {
        Vec::new()
    }
}

//! The seam between the heartbeat loop and the check engine.
//!
//! The loop hands every newly pulled config to [`ChecksSource::apply_config`] and asks
//! [`ChecksSource::results`] for the current results each time it builds a report. The
//! check engine (a later piece of work) implements this trait; until then agents run with
//! [`NoChecks`], whose reports carry no check results.

use fleetpulse_common::protocol::report::{AgentConfig, CheckResult};

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

//! [`AgentStatus`]: what a running agent has achieved so far, published after every
//! attempt so tests and diagnostics can watch it.

use std::sync::Arc;
use std::time::Duration;

use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::{AgentConfig, ClusterId};

/// A snapshot of an agent's progress.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentStatus {
    /// The cluster the agent reports for.
    pub cluster: ClusterId,
    /// The incarnation in use (raised above the hub's after a sequence rejection).
    pub incarnation: u64,
    /// The position of the last report sent (accepted or not).
    pub last_sent: Option<Position>,
    /// The position of the last report the hub accepted, as it answered.
    pub last_accepted: Option<Position>,
    /// How many reports the hub accepted.
    pub accepted_total: u64,
    /// The interval in use: the configured one until the hub answers with its own.
    pub interval: Duration,
    /// The config generation applied (0: none yet).
    pub config_generation: u64,
    /// The last config pulled from the hub.
    pub config: Option<Arc<AgentConfig>>,
    /// Failed attempts since the last accepted report (retries included).
    pub consecutive_failures: u32,
    /// The last failure, as logged.
    pub last_error: Option<String>,
    /// The code of the last rejection, when the hub sent one.
    pub last_reject_code: Option<RejectCode>,
    /// Key rotations the hub accepted since the agent started.
    pub key_rotations: u64,
}

impl AgentStatus {
    /// The status of an agent that has sent nothing yet.
    pub fn starting(cluster: ClusterId, incarnation: u64, interval: Duration) -> Self {
        Self {
            cluster,
            incarnation,
            last_sent: None,
            last_accepted: None,
            accepted_total: 0,
            interval,
            config_generation: 0,
            config: None,
            consecutive_failures: 0,
            last_error: None,
            last_reject_code: None,
            key_rotations: 0,
        }
    }

    /// The seq of the last accepted report.
    pub fn last_accepted_seq(&self) -> Option<u64> {
        self.last_accepted.map(|p| p.seq)
    }
}

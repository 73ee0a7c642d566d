//! [`RunnerSettings`]: the knobs of a pod check runner that the check spec does not set.

use std::time::Duration;

/// Timing and size knobs of a runner that the check spec does not set.
#[derive(Clone, Debug)]
pub struct RunnerSettings {
    /// How often a running pod is read (default 2 s).
    pub poll_interval: Duration,
    /// How long a pod may stay in a start failure that can clear on its own, such as
    /// `ImagePullBackOff`, before the run fails (default 30 s).
    pub start_grace: Duration,
    /// Bound on each API call (default 30 s).
    pub api_timeout: Duration,
    /// Log lines of a failed container in the message (default 20).
    pub log_tail_lines: u32,
    /// Bytes of those lines kept, the end of them (default 1024).
    pub log_tail_bytes: usize,
}

impl Default for RunnerSettings {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(2),
            start_grace: Duration::from_secs(30),
            api_timeout: Duration::from_secs(30),
            log_tail_lines: 20,
            log_tail_bytes: 1024,
        }
    }
}

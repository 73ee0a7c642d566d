//! What the accept loop does when it cannot accept: back off (5 ms doubling to 1 s) rather
//! than retry at once, and log at most once a second; and when the connection cap is
//! reached: close the new connection and log at most every 10 s, with how many were
//! refused in between.

use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// Backoff after accept errors, reset by the next accepted connection.
pub(super) struct Backoff {
    delays: Option<ExponentialBackoff>,
    log: Every,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            delays: None,
            log: Every::new(Duration::from_secs(1)),
        }
    }
}

impl Backoff {
    /// A connection was accepted: the next error waits the shortest delay again.
    pub(super) fn reset(&mut self) {
        self.delays = None;
    }

    /// Waits before the next accept. An error about one connection only (its peer gave
    /// up before it was accepted) is retried at once.
    pub(super) async fn wait(&mut self, error: &std::io::Error) {
        use std::io::ErrorKind::{ConnectionAborted, ConnectionReset, Interrupted};
        if matches!(
            error.kind(),
            ConnectionAborted | ConnectionReset | Interrupted
        ) {
            return;
        }
        let delays = self.delays.get_or_insert_with(|| {
            ExponentialBuilder::new()
                .with_min_delay(Duration::from_millis(5))
                .with_max_delay(Duration::from_secs(1))
                .without_max_times()
                .build()
        });
        let delay = delays.next().unwrap_or(Duration::from_secs(1));
        if let Some(suppressed) = self.log.ready() {
            tracing::error!(
                %error,
                retry_in_ms = delay.as_millis() as u64,
                errors_since_last_log = suppressed,
                "cannot accept connections; backing off (if this says too many open files, \
                 raise the hub's open-files limit: `ulimit -n`, or the container runtime's nofile)"
            );
        }
        tokio::time::sleep(delay).await;
    }
}

/// Connections closed because the cap was reached.
pub(super) struct Refusals {
    log: Every,
}

impl Default for Refusals {
    fn default() -> Self {
        Self {
            log: Every::new(Duration::from_secs(10)),
        }
    }
}

impl Refusals {
    /// One connection was closed at once because `max` are open.
    pub(super) fn refused(&mut self, max: usize) {
        if let Some(suppressed) = self.log.ready() {
            tracing::warn!(
                max_connections = max,
                refused_since_last_log = suppressed,
                "connection limit reached; closing new connections until some close (if these \
                 are agents, raise --max-connections together with the memory limit)"
            );
        }
    }
}

/// At most one log line per period; counts what it held back.
struct Every {
    period: Duration,
    last: Option<Instant>,
    held_back: u64,
}

impl Every {
    fn new(period: Duration) -> Self {
        Self {
            period,
            last: None,
            held_back: 0,
        }
    }

    /// `Some(events held back since the last line)` when a line may be logged now.
    fn ready(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self.last.is_some_and(|last| now - last < self.period) {
            self.held_back += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.held_back))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_events_logs_once_per_period_and_counts_the_rest() {
        let mut every = Every::new(Duration::from_secs(3600));
        assert_eq!(every.ready(), Some(0));
        for _ in 0..1000 {
            assert_eq!(every.ready(), None);
        }
        every.last = Some(Instant::now() - Duration::from_secs(3601));
        assert_eq!(every.ready(), Some(1000));
    }
}

//! The failure detector: is a cluster's agent still reporting, judged on the hub's own
//! monotonic clock (receive time), never on the agent's clock.
//!
//! Pure: every method takes `now`. A cluster is judged only after it had a full grace
//! period to report since the later of its last heartbeat and its *grace start*: the hub's
//! start, the cluster's registration, or a reset (after a partition). That gives the
//! startup grace: a restarted hub never marks a cluster unreachable before the cluster
//! had a whole grace period to reach it.

use std::time::{Duration, Instant};

/// What the detector concludes about one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reachability {
    /// A heartbeat arrived within the grace period.
    Reachable,
    /// No heartbeat within the grace period since the grace start: not judged yet.
    Pending,
    /// No heartbeat for longer than the grace period.
    Unreachable {
        /// How long the cluster has been silent (since its last heartbeat, or since the
        /// grace start if it never reported to this hub process).
        silent_for: Duration,
        /// Whether any heartbeat was received by this hub process.
        ever_reported: bool,
    },
}

/// Per-cluster liveness.
#[derive(Clone, Debug)]
pub struct Liveness {
    last_heartbeat: Option<Instant>,
    grace_start: Instant,
}

impl Liveness {
    /// A cluster first seen at `now` (hub start or registration): its grace starts now.
    pub fn new(now: Instant) -> Self {
        Self {
            last_heartbeat: None,
            grace_start: now,
        }
    }

    /// Records an accepted heartbeat received at `now`.
    pub fn heartbeat(&mut self, now: Instant) {
        self.last_heartbeat = Some(self.last_heartbeat.map_or(now, |last| last.max(now)));
    }

    /// Gives the cluster a fresh grace period from `now` (e.g. after the hub was cut off).
    pub fn reset_grace(&mut self, now: Instant) {
        self.grace_start = self.grace_start.max(now);
    }

    /// When the last heartbeat was received.
    pub fn last_heartbeat(&self) -> Option<Instant> {
        self.last_heartbeat
    }

    /// Judges the cluster at `now` with its grace period.
    pub fn judge(&self, now: Instant, grace: Duration) -> Reachability {
        if let Some(last) = self.last_heartbeat
            && now.saturating_duration_since(last) <= grace
        {
            return Reachability::Reachable;
        }
        if now.saturating_duration_since(self.grace_start) <= grace {
            return Reachability::Pending;
        }
        let silent_since = self.last_heartbeat.unwrap_or(self.grace_start);
        Reachability::Unreachable {
            silent_for: now.saturating_duration_since(silent_since),
            ever_reported: self.last_heartbeat.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(40);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn heartbeat_within_grace_is_reachable_and_silence_past_grace_is_not() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0);
        l.heartbeat(t0 + secs(5));
        assert_eq!(l.judge(t0 + secs(45), GRACE), Reachability::Reachable);
        assert_eq!(
            l.judge(t0 + secs(46), GRACE),
            Reachability::Unreachable {
                silent_for: secs(41),
                ever_reported: true
            }
        );
    }

    #[test]
    fn a_new_or_restarted_hub_judges_no_cluster_before_a_full_grace_period() {
        let t0 = Instant::now();
        let l = Liveness::new(t0);
        assert_eq!(l.judge(t0 + secs(40), GRACE), Reachability::Pending);
        assert_eq!(
            l.judge(t0 + secs(41), GRACE),
            Reachability::Unreachable {
                silent_for: secs(41),
                ever_reported: false
            }
        );
    }

    #[test]
    fn reset_grace_postpones_judgement_of_a_silent_cluster() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0);
        l.heartbeat(t0);
        l.reset_grace(t0 + secs(100));
        assert_eq!(l.judge(t0 + secs(120), GRACE), Reachability::Pending);
        assert!(matches!(
            l.judge(t0 + secs(141), GRACE),
            Reachability::Unreachable { .. }
        ));
    }

    #[test]
    fn an_out_of_order_older_heartbeat_never_moves_the_clock_back() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0);
        l.heartbeat(t0 + secs(30));
        l.heartbeat(t0 + secs(10));
        assert_eq!(l.last_heartbeat(), Some(t0 + secs(30)));
    }
}

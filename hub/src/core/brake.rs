//! The partition brake: when most of the clusters that were reporting go quiet at the same
//! time, the likelier story is that the hub was cut off, not that they all failed. The
//! brake then freezes set reassignment until heartbeats return, and afterwards gives every
//! cluster a fresh grace period before anything may move again.
//!
//! Pure: every tick the hub feeds it each cluster's last heartbeat time (on the hub's
//! clock, `None` if it never reported to this hub process) and grace period.
//!
//! - A cluster is *reporting* if it was heard within two grace periods, and *late* if it
//!   has been silent for more than half its grace period (so the brake engages before the
//!   detector calls anyone unreachable) but not more than two grace periods (long-dead
//!   clusters do not count).
//! - Engages when `late >= min_clusters` and `late / reporting > threshold`.
//! - While engaged, it counts the clusters heard since it engaged; it releases when they are
//!   at least `1 - threshold` of those reporting when it engaged (or after `release_after`,
//!   if set). It then settles for `settle` (the longest grace period) with reassignment
//!   still frozen, and the caller gives every cluster a fresh grace period.

use std::time::{Duration, Instant};

/// Brake settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BrakeSettings {
    /// Share of reporting clusters that must be late at once (default 0.55).
    pub threshold: f64,
    /// Fewest late clusters that can engage the brake (default 2: two clusters going
    /// quiet in the same moment is as suspicious as sixty; one alone is an ordinary
    /// failure, and the never-empty rule of set selection covers a fleet of one).
    pub min_clusters: usize,
    /// Release even if clusters stay silent this long (`None`: only when they return).
    pub release_after: Option<Duration>,
}

impl Default for BrakeSettings {
    fn default() -> Self {
        Self {
            threshold: 0.55,
            min_clusters: 2,
            release_after: None,
        }
    }
}

/// Where the brake is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BrakeState {
    /// Normal operation.
    Released,
    /// Reassignment frozen since `since`; `late` of `reporting` clusters were late.
    Engaged {
        /// When it engaged.
        since: Instant,
        /// Late clusters when it engaged.
        late: usize,
        /// Reporting clusters when it engaged.
        reporting: usize,
    },
    /// Heartbeats returned; reassignment stays frozen until `until`.
    Settling {
        /// End of the settling period.
        until: Instant,
    },
}

/// What changed at a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrakeEvent {
    /// The brake engaged.
    Engaged,
    /// The brake released; the caller must give every cluster a fresh grace period.
    Released,
    /// The settling period ended; reassignment may resume.
    Settled,
}

/// How long the brake stays frozen after a release: the longest grace period among the
/// `(last heartbeat, grace period)` samples it observes.
pub fn settle(samples: &[(Option<Instant>, Duration)]) -> Duration {
    samples
        .iter()
        .map(|(_, grace)| *grace)
        .max()
        .unwrap_or_default()
}

/// The brake.
#[derive(Clone, Debug)]
pub struct Brake {
    settings: BrakeSettings,
    state: BrakeState,
}

impl Brake {
    /// A released brake.
    pub fn new(settings: BrakeSettings) -> Self {
        Self {
            settings,
            state: BrakeState::Released,
        }
    }

    /// The current state.
    pub fn state(&self) -> BrakeState {
        self.state
    }

    /// Whether set reassignment is frozen.
    pub fn frozen(&self) -> bool {
        !matches!(self.state, BrakeState::Released)
    }

    /// Feeds one tick. `clusters` yields each cluster's last heartbeat and grace period;
    /// `settle` is how long to stay frozen after a release (the longest grace period).
    pub fn observe(
        &mut self,
        now: Instant,
        clusters: impl IntoIterator<Item = (Option<Instant>, Duration)>,
        settle: Duration,
    ) -> Option<BrakeEvent> {
        let (mut reporting, mut late, mut heard_since_engaged) = (0usize, 0usize, 0usize);
        let engaged_at = match self.state {
            BrakeState::Engaged { since, .. } => Some(since),
            _ => None,
        };
        for (last, grace) in clusters {
            let Some(last) = last else { continue };
            let silent = now.saturating_duration_since(last);
            if silent <= grace * 2 {
                reporting += 1;
                if silent > grace / 2 {
                    late += 1;
                }
            }
            if engaged_at.is_some_and(|since| last >= since) {
                heard_since_engaged += 1;
            }
        }
        let partitioned = late >= self.settings.min_clusters
            && late as f64 > self.settings.threshold * reporting as f64;
        match self.state {
            BrakeState::Released if partitioned => {
                self.state = BrakeState::Engaged {
                    since: now,
                    late,
                    reporting,
                };
                Some(BrakeEvent::Engaged)
            }
            BrakeState::Engaged {
                since,
                reporting: before,
                ..
            } => {
                let back =
                    heard_since_engaged as f64 >= (1.0 - self.settings.threshold) * before as f64;
                let timed_out = self
                    .settings
                    .release_after
                    .is_some_and(|d| now.saturating_duration_since(since) >= d);
                if back || timed_out {
                    self.state = BrakeState::Settling {
                        until: now + settle,
                    };
                    Some(BrakeEvent::Released)
                } else {
                    None
                }
            }
            BrakeState::Settling { .. } if partitioned => {
                self.state = BrakeState::Engaged {
                    since: now,
                    late,
                    reporting,
                };
                Some(BrakeEvent::Engaged)
            }
            BrakeState::Settling { until } if now >= until => {
                self.state = BrakeState::Released;
                Some(BrakeEvent::Settled)
            }
            _ => None,
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

    /// `quiet` clusters last heard at `quiet_since`, the rest at `now`.
    fn fleet(
        now: Instant,
        total: usize,
        quiet: usize,
        quiet_since: Instant,
    ) -> Vec<(Option<Instant>, Duration)> {
        (0..total)
            .map(|i| (Some(if i < quiet { quiet_since } else { now }), GRACE))
            .collect()
    }

    #[test]
    fn engages_before_the_grace_period_when_most_go_quiet_then_releases_and_settles() {
        let t0 = Instant::now();
        let mut b = Brake::new(BrakeSettings::default());
        let at = |s| t0 + secs(s);
        assert_eq!(
            b.observe(at(19), fleet(at(19), 10, 6, t0), GRACE),
            None,
            "not late yet"
        );
        assert_eq!(
            b.observe(at(21), fleet(at(21), 10, 5, t0), GRACE),
            None,
            "50% is not above 55%"
        );
        assert_eq!(
            b.observe(at(21), fleet(at(21), 10, 6, t0), GRACE),
            Some(BrakeEvent::Engaged)
        );
        assert!(b.frozen());
        assert_eq!(
            b.observe(at(300), fleet(at(300), 10, 6, t0), GRACE),
            None,
            "silent for long: still engaged"
        );
        assert_eq!(
            b.observe(at(301), fleet(at(301), 10, 5, t0), GRACE),
            Some(BrakeEvent::Released),
            "5 of 10 back"
        );
        assert!(b.frozen(), "frozen while settling");
        assert_eq!(b.observe(at(320), fleet(at(320), 10, 0, t0), GRACE), None);
        assert_eq!(
            b.observe(at(341), fleet(at(341), 10, 0, t0), GRACE),
            Some(BrakeEvent::Settled)
        );
        assert!(!b.frozen());
    }

    #[test]
    fn long_dead_and_never_seen_clusters_do_not_count() {
        let t0 = Instant::now();
        let mut b = Brake::new(BrakeSettings::default());
        let now = t0 + secs(1000);
        let mut clusters = fleet(now, 4, 0, t0);
        clusters.extend((0..6).map(|_| (Some(t0), GRACE)));
        clusters.extend((0..6).map(|_| (None, GRACE)));
        assert_eq!(b.observe(now, clusters, GRACE), None);
    }

    #[test]
    fn a_small_fleet_needs_min_clusters_late() {
        let t0 = Instant::now();
        let now = t0 + secs(30);
        let mut b = Brake::new(BrakeSettings::default());
        assert_eq!(
            b.observe(now, fleet(now, 1, 1, t0), GRACE),
            None,
            "one cluster going quiet is an ordinary failure"
        );
        assert_eq!(
            b.observe(now, fleet(now, 2, 1, t0), GRACE),
            None,
            "one of two is not a majority"
        );
        assert_eq!(
            b.observe(now, fleet(now, 2, 2, t0), GRACE),
            Some(BrakeEvent::Engaged),
            "both clusters of an active/passive pair going quiet at once"
        );
        let strict = BrakeSettings {
            min_clusters: 3,
            ..Default::default()
        };
        let mut b = Brake::new(strict);
        assert_eq!(b.observe(now, fleet(now, 2, 2, t0), GRACE), None);
        assert_eq!(
            b.observe(now, fleet(now, 3, 3, t0), GRACE),
            Some(BrakeEvent::Engaged)
        );
    }

    #[test]
    fn release_after_frees_a_fleet_that_really_lost_its_majority() {
        let t0 = Instant::now();
        let settings = BrakeSettings {
            release_after: Some(secs(600)),
            ..Default::default()
        };
        let mut b = Brake::new(settings);
        let at = |s| t0 + secs(s);
        b.observe(at(30), fleet(at(30), 10, 8, t0), GRACE);
        assert_eq!(b.observe(at(629), fleet(at(629), 10, 8, t0), GRACE), None);
        assert_eq!(
            b.observe(at(630), fleet(at(630), 10, 8, t0), GRACE),
            Some(BrakeEvent::Released)
        );
    }

    #[test]
    fn going_quiet_again_while_settling_engages_again() {
        let t0 = Instant::now();
        let at = |s| t0 + secs(s);
        let mut b = Brake::new(BrakeSettings::default());
        b.observe(at(30), fleet(at(30), 10, 6, t0), GRACE);
        b.observe(at(31), fleet(at(31), 10, 0, t0), GRACE);
        assert_eq!(
            b.observe(at(60), fleet(at(60), 10, 7, at(31)), GRACE),
            Some(BrakeEvent::Engaged)
        );
    }
}

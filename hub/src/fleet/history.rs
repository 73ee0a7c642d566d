//! What the console shows of one cluster's recent past, kept in memory beside its state:
//! each check's result changes (a check turning passing or failing, or its message
//! changing) and the gaps between accepted heartbeats longer than two intervals. Bounded
//! ([`CHECK_CHANGES`], [`GAPS`]); a restarted hub, or a new leader, starts with none.
//! Nothing here decides anything.

use std::collections::VecDeque;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
/// Check result changes kept per cluster (all its checks together).
pub const CHECK_CHANGES: usize = 64;
/// Heartbeat gaps kept per cluster.
pub const GAPS: usize = 20;

/// A cluster's recent check result changes and heartbeat gaps.
#[derive(Debug, Default)]
pub struct ClusterHistory {
    checks: VecDeque<CheckChange>,
    gaps: VecDeque<Gap>,
}

/// One check's result as it changed.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckChange {
    /// When the hub accepted the report that carried it.
    pub at: Timestamp,
    /// The check.
    pub check: Box<str>,
    /// Whether it passed from then on.
    pub passing: bool,
    /// What it said.
    pub message: Box<str>,
}

/// A silence between two accepted heartbeats longer than two intervals.
#[derive(Clone, Debug, PartialEq)]
pub struct Gap {
    /// The heartbeat before it.
    pub from: Timestamp,
    /// The heartbeat that ended it.
    pub to: Timestamp,
}

impl ClusterHistory {
    /// Records that `check` now says `passing` and `message` (a report changed it).
    pub fn check_changed(&mut self, check: &str, passing: bool, message: &str, at: Timestamp) {
        if self.checks.len() == CHECK_CHANGES {
            self.checks.pop_front();
        }
        self.checks.push_back(CheckChange {
            at,
            check: check.into(),
            passing,
            message: message.into(),
        });
    }

    /// Records a heartbeat accepted at `at` after the one at `previous`: a gap when they
    /// lie more than two intervals apart.
    pub fn heard(&mut self, previous: Option<Timestamp>, at: Timestamp, interval_seconds: u32) {
        let Some(previous) = previous else {
            return;
        };
        let longest = SignedDuration::from_secs(2 * i64::from(interval_seconds.max(1)));
        if at.duration_since(previous) <= longest {
            return;
        }
        if self.gaps.len() == GAPS {
            self.gaps.pop_front();
        }
        self.gaps.push_back(Gap {
            from: previous,
            to: at,
        });
    }

    /// The check result changes, oldest first.
    pub fn check_changes(&self) -> Vec<CheckChange> {
        self.checks.iter().cloned().collect()
    }

    /// The heartbeat gaps, oldest first.
    pub fn gaps(&self) -> Vec<Gap> {
        self.gaps.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).expect("a valid time")
    }

    #[test]
    fn only_silences_longer_than_two_intervals_are_gaps() {
        let mut history = ClusterHistory::default();
        history.heard(None, at(10), 5);
        history.heard(Some(at(10)), at(20), 5);
        history.heard(Some(at(20)), at(31), 5);
        assert_eq!(
            history.gaps(),
            [Gap {
                from: at(20),
                to: at(31)
            }]
        );
    }

    #[test]
    fn the_oldest_changes_make_room_for_the_newest() {
        let mut history = ClusterHistory::default();
        for i in 0..CHECK_CHANGES + 3 {
            history.check_changed("nodes", i % 2 == 0, &format!("run {i}"), at(i as i64));
            history.heard(Some(at(0)), at(100 + i as i64), 1);
        }
        let changes = history.check_changes();
        assert_eq!(changes.len(), CHECK_CHANGES);
        assert_eq!(&*changes[0].message, "run 3");
        assert_eq!(history.gaps().len(), GAPS);
        assert_eq!(
            history.gaps()[GAPS - 1].to,
            at(100 + CHECK_CHANGES as i64 + 2)
        );
    }
}

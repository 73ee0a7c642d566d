//! The last condition transitions of one cluster, kept in memory for `describe` and
//! counted by the metrics: each status the hub writes is compared with the one before it,
//! and every condition whose status changed is remembered (the newest [`KEPT`]).

use std::collections::VecDeque;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use fleetpulse_common::api::condition::Status;

/// Transitions kept per cluster.
pub const KEPT: usize = 10;

/// One condition changing status, as the read API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    /// `Reachable`, `Ready` or `Healthy`.
    pub condition: String,
    /// The status before; absent for the first status this hub process wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The status after.
    pub to: String,
    /// Why, as the condition's reason.
    pub reason: String,
    /// The condition's message.
    pub message: String,
    /// When (the condition's `lastTransitionTime`).
    pub at: Time,
}

/// One cluster's condition statuses as last written and its recent transitions. Part of
/// the cluster's state, so it changes under the cluster's lock, in the order of its writes.
/// Held compactly (statuses as enums, strings boxed): every cluster has one.
#[derive(Debug, Default)]
pub struct TransitionLog {
    /// Each condition's status as last written; `None` before this process's first write.
    last: Option<Box<[Written]>>,
    recent: VecDeque<Kept>,
}

/// A condition's type and its status as written.
type Written = (Box<str>, Status);

#[derive(Debug)]
struct Kept {
    condition: Box<str>,
    from: Option<Status>,
    to: Status,
    reason: Box<str>,
    message: Box<str>,
    at: Timestamp,
}

/// What one written status changed.
#[derive(Debug)]
pub struct Observed<'c> {
    /// Whether it was this process's first write of the cluster's status (the conditions
    /// it carries may have been restored from the store rather than changed).
    pub first: bool,
    /// The conditions whose status differs from the last write (all, on the first).
    pub changed: Vec<&'c Condition>,
}

impl TransitionLog {
    /// Records the transitions from the statuses last written to `conditions`.
    pub fn observe<'c>(&mut self, conditions: &'c [Condition]) -> Observed<'c> {
        let before = self.last.as_deref().unwrap_or_default();
        let previous = |c: &Condition| {
            (before.iter())
                .find(|(type_, _)| **type_ == *c.type_)
                .map(|(_, status)| *status)
        };
        let changed: Vec<&Condition> = conditions
            .iter()
            .filter(|c| previous(c) != Some(Status::parse(&c.status)))
            .collect();
        for c in &changed {
            self.recent.push_back(Kept {
                condition: c.type_.as_str().into(),
                from: previous(c),
                to: Status::parse(&c.status),
                reason: c.reason.as_str().into(),
                message: c.message.as_str().into(),
                at: c.last_transition_time.0,
            });
        }
        while self.recent.len() > KEPT {
            self.recent.pop_front();
        }
        let first = self.last.is_none();
        self.last = Some(
            conditions
                .iter()
                .map(|c| (c.type_.as_str().into(), Status::parse(&c.status)))
                .collect(),
        );
        Observed { first, changed }
    }

    /// The recent transitions, oldest first.
    pub fn recent(&self) -> Vec<Transition> {
        let status = |s: Status| s.as_str().to_owned();
        (self.recent.iter())
            .map(|k| Transition {
                condition: k.condition.to_string(),
                from: k.from.map(status),
                to: status(k.to),
                reason: k.reason.to_string(),
                message: k.message.to_string(),
                at: Time(k.at),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetpulse_common::api::condition;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn only_status_changes_are_kept_and_only_the_newest() {
        let mut log = TransitionLog::default();
        let mut conditions = Vec::new();
        condition::set(
            &mut conditions,
            "Healthy",
            Status::True,
            "ChecksPassing",
            "",
            at(0),
        );
        assert!(log.observe(&conditions).first);
        condition::set(
            &mut conditions,
            "Healthy",
            Status::True,
            "ChecksPassing",
            "again",
            at(1),
        );
        let observed = log.observe(&conditions);
        assert!(!observed.first && observed.changed.is_empty());
        assert_eq!(log.recent().len(), 1, "a message change is no transition");
        for i in 0..20i64 {
            let status = if i % 2 == 0 {
                Status::False
            } else {
                Status::True
            };
            condition::set(&mut conditions, "Healthy", status, "R", "", at(10 + i));
            assert_eq!(log.observe(&conditions).changed.len(), 1);
        }
        let recent = log.recent();
        assert_eq!(recent.len(), KEPT);
        let last = recent.last().unwrap();
        assert_eq!(
            (last.from.as_deref(), last.to.as_str()),
            (Some("False"), "True")
        );
        assert_eq!(last.at.0, at(29));
    }

    #[test]
    fn a_condition_first_written_has_no_before_and_counts_as_changed() {
        let mut log = TransitionLog::default();
        let mut conditions = Vec::new();
        condition::set(&mut conditions, "Ready", Status::True, "Passed", "", at(0));
        log.observe(&conditions);
        condition::set(
            &mut conditions,
            "Mirrored",
            Status::False,
            "Conflict",
            "m",
            at(1),
        );
        let observed = log.observe(&conditions);
        assert!(!observed.first);
        let changed: Vec<&str> = observed.changed.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(changed, ["Mirrored"]);
        let recent = log.recent();
        let mirrored = recent.last().unwrap();
        assert_eq!(
            (mirrored.condition.as_str(), mirrored.from.as_deref()),
            ("Mirrored", None)
        );
        assert_eq!(
            (mirrored.reason.as_str(), mirrored.message.as_str()),
            ("Conflict", "m")
        );
    }
}

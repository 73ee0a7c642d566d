//! Each set's recent selections, kept in memory for the console's failover timeline: every
//! evaluation that moved a set's selection (or dropped a cluster for health) is kept with
//! when it happened, whom the set selected from then on, and why ([`MOVES`] per set). A
//! restarted hub, or a new leader, starts with none: the set's status still says when and
//! why it last failed over.

use std::collections::{HashMap, VecDeque};

use k8s_openapi::jiff::Timestamp;

use crate::core::sets::{SetChange, selected_ids};
use crate::ids::{ClusterId, SetKey};

/// Selections kept per set.
pub const MOVES: usize = 100;

/// One change of a set's selection.
#[derive(Clone, Debug, PartialEq)]
pub struct SetMove {
    /// When the evaluation ran.
    pub at: Timestamp,
    /// The clusters selected from then on.
    pub selected: Vec<ClusterId>,
    /// The clusters dropped for health, each with why (a failover when not empty).
    pub dropped: Vec<(ClusterId, String)>,
}

/// The recent selections of every set.
#[derive(Debug, Default)]
pub struct Timelines(HashMap<SetKey, VecDeque<SetMove>>);

impl Timelines {
    /// Keeps `change` when it moved the selection or dropped a cluster.
    pub fn record(&mut self, change: &SetChange, at: Timestamp) {
        if !change.moved && change.dropped.is_empty() {
            return;
        }
        let moves = self.0.entry(change.key.clone()).or_default();
        if moves.len() == MOVES {
            moves.pop_front();
        }
        moves.push_back(SetMove {
            at,
            selected: selected_ids(&change.key, &change.status),
            dropped: change.dropped.clone(),
        });
    }

    /// Forgets the sets `present` does not accept (deleted ones).
    pub fn retain(&mut self, present: impl Fn(&SetKey) -> bool) {
        self.0.retain(|key, _| present(key));
    }

    /// The recent selections of `key`, oldest first.
    pub fn of(&self, key: &SetKey) -> Vec<SetMove> {
        (self.0.get(key)).map_or_else(Vec::new, |m| m.iter().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use fleetpulse_common::api::{ClusterRef, SetStatus};

    use super::*;

    fn change(selected: &[&str], dropped: &[&str], moved: bool) -> SetChange {
        let refs = |names: &[&str]| {
            (names.iter())
                .map(|n| ClusterRef {
                    namespace: Some("fleet".into()),
                    name: (*n).into(),
                    ..Default::default()
                })
                .collect()
        };
        SetChange {
            key: SetKey::ClusterSet("primary".into()),
            status: SetStatus {
                selected_cluster_refs: refs(selected),
                ..Default::default()
            },
            dropped: (dropped.iter())
                .map(|n| (ClusterId::new("fleet", *n), "Healthy=False".to_owned()))
                .collect(),
            moved,
        }
    }

    #[test]
    fn moves_and_failovers_are_kept_and_condition_changes_are_not() {
        let mut timelines = Timelines::default();
        let key = SetKey::ClusterSet("primary".into());
        let at = |s| Timestamp::from_second(s).expect("a valid time");
        timelines.record(&change(&["edge-1"], &[], true), at(1));
        timelines.record(&change(&["edge-1"], &[], false), at(2));
        timelines.record(&change(&["edge-2"], &["edge-1"], true), at(3));
        let moves = timelines.of(&key);
        assert_eq!(moves.len(), 2);
        assert_eq!(moves[1].at, at(3));
        assert_eq!(moves[1].selected, [ClusterId::new("fleet", "edge-2")]);
        assert_eq!(moves[1].dropped[0].0, ClusterId::new("fleet", "edge-1"));
        timelines.retain(|_| false);
        assert!(timelines.of(&key).is_empty());
    }
}

//! The last condition transitions of each cluster, kept in memory for `describe`: each
//! status the hub writes is compared with the one before it, and every condition whose
//! status changed is remembered (the newest [`KEPT`] per cluster).

use std::collections::{HashMap, VecDeque};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::{Deserialize, Serialize};

use fleetpulse_common::protocol::report::ClusterId;

/// Transitions kept per cluster.
pub const KEPT: usize = 10;

/// One condition changing status.
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

/// Every cluster's last written conditions and recent transitions.
#[derive(Debug, Default)]
pub struct TransitionLog {
    last: HashMap<ClusterId, Vec<Condition>>,
    recent: HashMap<ClusterId, VecDeque<Transition>>,
}

impl TransitionLog {
    /// Records the transitions from the cluster's previous conditions to `conditions`.
    pub fn observe(&mut self, cluster: &ClusterId, conditions: &[Condition]) {
        let before = self
            .last
            .get(cluster)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let changed: Vec<Transition> = conditions
            .iter()
            .filter_map(|c| {
                let previous = before.iter().find(|b| b.type_ == c.type_);
                (previous.map(|p| &p.status) != Some(&c.status)).then(|| Transition {
                    condition: c.type_.clone(),
                    from: previous.map(|p| p.status.clone()),
                    to: c.status.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                    at: c.last_transition_time.clone(),
                })
            })
            .collect();
        if !changed.is_empty() {
            let recent = self.recent.entry(cluster.clone()).or_default();
            recent.extend(changed);
            while recent.len() > KEPT {
                recent.pop_front();
            }
        }
        self.last.insert(cluster.clone(), conditions.to_vec());
    }

    /// The cluster's recent transitions, oldest first.
    pub fn recent(&self, cluster: &ClusterId) -> Vec<Transition> {
        self.recent
            .get(cluster)
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetpulse_common::api::condition::{self, Status};
    use k8s_openapi::jiff::Timestamp;

    #[test]
    fn only_status_changes_are_kept_and_only_the_newest() {
        let id = ClusterId::new("fleet", "edge-1");
        let mut log = TransitionLog::default();
        let mut conditions = Vec::new();
        let t = |s| Timestamp::from_second(1_800_000_000 + s).unwrap();
        condition::set(
            &mut conditions,
            "Healthy",
            Status::True,
            "ChecksPassing",
            "",
            t(0),
        );
        log.observe(&id, &conditions);
        condition::set(
            &mut conditions,
            "Healthy",
            Status::True,
            "ChecksPassing",
            "again",
            t(1),
        );
        log.observe(&id, &conditions);
        assert_eq!(
            log.recent(&id).len(),
            1,
            "a message change is no transition"
        );
        for i in 0..20i64 {
            let status = if i % 2 == 0 {
                Status::False
            } else {
                Status::True
            };
            condition::set(&mut conditions, "Healthy", status, "R", "", t(10 + i));
            log.observe(&id, &conditions);
        }
        let recent = log.recent(&id);
        assert_eq!(recent.len(), KEPT);
        let last = recent.last().unwrap();
        assert_eq!(
            (last.from.as_deref(), last.to.as_str()),
            (Some("False"), "True")
        );
        assert_eq!(last.at.0, t(29));
    }
}

//! HealthPolicy status, kept up to date change by change: each policy's tally (how many
//! clusters it applies to, which of its checks each could not add) moves when one of its
//! clusters is rebuilt, and its `Accepted` condition is restamped only when its status
//! changes.

use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::HealthPolicyStatus;
use fleetpulse_common::api::condition::{self, Status};

use crate::ids::ClusterId;

/// A HealthPolicy's namespace and name.
pub type PolicyKey = (String, String);

/// One policy's tally and status.
#[derive(Clone, Debug, Default)]
pub struct PolicyRecord {
    /// Clusters it applies to.
    matched: u32,
    /// Per cluster, the messages of its checks skipped there.
    skipped: imbl::OrdMap<ClusterId, Vec<String>>,
    /// The status as last computed (with its condition's transition time).
    pub status: HealthPolicyStatus,
}

impl PolicyRecord {
    /// Counts `cluster` in (`+1`) or out (`-1`) with the clash messages it had.
    pub fn tally(&mut self, cluster: &ClusterId, clashes: &[String], added: bool) {
        if added {
            self.matched += 1;
            if !clashes.is_empty() {
                self.skipped.insert(cluster.clone(), clashes.to_vec());
            }
        } else {
            self.matched = self.matched.saturating_sub(1);
            self.skipped.remove(cluster);
        }
    }

    /// Recomputes the status for a policy of `generation` at `now`: the `Accepted`
    /// condition keeps its transition time unless its status changed.
    pub fn restamp(&mut self, generation: Option<i64>, now: Timestamp) {
        let (s, reason, message) = if self.skipped.is_empty() {
            (
                Status::True,
                "Applied",
                format!("applied to {} MemberClusters", self.matched),
            )
        } else {
            let all: Vec<&String> = self.skipped.values().flatten().collect();
            let shown: Vec<&str> = all.iter().take(3).map(|s| s.as_str()).collect();
            let more = all.len().saturating_sub(3);
            let tail = if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            };
            (
                Status::False,
                "CheckNameClash",
                format!("{}{tail}", shown.join("; ")),
            )
        };
        // `set` keeps the transition time while the status stays the same.
        condition::set(
            &mut self.status.conditions,
            condition::ACCEPTED,
            s,
            reason,
            &message,
            now,
        );
        self.status.matched_clusters = self.matched;
        self.status.observed_generation = generation;
    }
}

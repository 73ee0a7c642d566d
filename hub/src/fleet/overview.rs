//! The fleet as the console shows it: one row per cluster (its three verdicts, when it was
//! last heard, its failing checks with their messages, the sets that select it), one
//! cluster in full (with its check result changes, heartbeat gaps and sets), and every set
//! with its members and recent selections. Built from the same state as the read API, with
//! the same redaction; times are milliseconds since the epoch, which a browser reads as is.
//! Projections only: nothing here decides.
//!
//! Where replicas share the fleet, a cluster of a shard another replica owns is shown as
//! that replica last wrote it on the MemberCluster, and its row says so (`owned: false`).

mod sets;

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use fleetpulse_common::api::condition::{self, HEALTHY, REACHABLE, READY, Status};
use fleetpulse_common::api::{CheckResult, MemberCluster};

use super::registry::ClusterEntry;
use super::{Fleet, transitions};
use crate::core::sets::{cluster_ids, selected_ids};
use crate::ids::ClusterId;

pub use sets::{Dropped, MoveView, SetView};

/// A time as the console carries it: milliseconds since the epoch.
pub type Millis = i64;

fn millis(t: Timestamp) -> Millis {
    t.as_millisecond()
}

/// One cluster in the fleet table.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetRow {
    /// `namespace/name`.
    pub id: String,
    /// `Reachable`: `True`, `False` or `Unknown`.
    pub reachable: &'static str,
    /// `Ready`.
    pub ready: &'static str,
    /// `Healthy`.
    pub healthy: &'static str,
    /// Why the first of the three that is not True is not: `Condition: reason: message`;
    /// empty while all three are True.
    pub reason: String,
    /// When the hub last accepted a heartbeat from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_heard: Option<Millis>,
    /// The checks failing now, with what they said.
    pub failing: Vec<FailingCheck>,
    /// The sets that select it (`ClusterSet primary`, `Set fleet/canary`).
    pub sets: Vec<String>,
    /// `spec.paused`.
    pub paused: bool,
    /// Replicas sharing the fleet: whether this replica judges it (else it shows what the
    /// owning replica last wrote). Absent when one replica judges the whole fleet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owned: Option<bool>,
}

/// A failing check and its message.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct FailingCheck {
    /// The check.
    pub name: String,
    /// What it said.
    pub message: String,
}

impl FleetRow {
    /// Tells rows apart as the console's live stream does: any change but `lastHeard`
    /// moving within the same `heard_step` milliseconds.
    pub fn fingerprint(&self, heard_step: Millis) -> u64 {
        let mut h = foldhash::fast::FixedState::with_seed(0x0f1e).build_hasher();
        let Self {
            id,
            reachable,
            ready,
            healthy,
            reason,
            last_heard,
            failing,
            sets,
            paused,
            owned,
        } = self;
        (
            id, reachable, ready, healthy, reason, failing, sets, paused, owned,
        )
            .hash(&mut h);
        last_heard.map(|t| t / heard_step.max(1)).hash(&mut h);
        h.finish()
    }
}

/// One cluster in full.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDetail {
    /// Its row.
    pub row: FleetRow,
    /// The MemberCluster with its live status, as the read API shows it.
    pub object: MemberCluster,
    /// Its recent condition transitions, oldest first.
    pub transitions: Vec<transitions::Transition>,
    /// Each check's result changes, oldest first.
    pub check_history: Vec<CheckChangeView>,
    /// Silences between accepted heartbeats longer than two intervals, oldest first.
    pub gaps: Vec<GapView>,
    /// The sets that match it, and whether each selects it.
    pub sets: Vec<Membership>,
}

/// A check's result as it changed.
#[derive(Clone, Debug, Serialize)]
pub struct CheckChangeView {
    /// When.
    pub at: Millis,
    /// The check.
    pub check: String,
    /// Whether it passed from then on.
    pub passing: bool,
    /// What it said.
    pub message: String,
}

/// A heartbeat gap.
#[derive(Clone, Debug, Serialize)]
pub struct GapView {
    /// The heartbeat before it.
    pub from: Millis,
    /// The heartbeat that ended it.
    pub to: Millis,
}

/// A set a cluster belongs to.
#[derive(Clone, Debug, Serialize)]
pub struct Membership {
    /// `ClusterSet primary` or `Set fleet/canary`.
    pub set: String,
    /// Whether the set selects the cluster now.
    pub selected: bool,
}

impl Fleet {
    /// `entry`'s row, selected by `sets`: from this replica's live state, or from what the
    /// replica owning its shard last wrote.
    fn row_of(&self, entry: &ClusterEntry, sets: Vec<String>) -> FleetRow {
        let owned = (self.ownership.get()).map(|o| o.term(&entry.id).is_some());
        if owned == Some(false) {
            let status = entry.object.status.as_ref();
            let conditions = status.map_or(&[][..], |s| &s.conditions);
            let checks = status.map_or(&[][..], |s| &s.checks);
            let heard = status
                .and_then(|s| s.last_heartbeat_time.as_ref())
                .map(|t| t.0);
            return row(entry, conditions, checks, heard, owned, sets);
        }
        let state = entry.state.lock();
        let conditions = state.core.health.conditions();
        row(
            entry,
            conditions,
            state.checks(),
            state.last_heartbeat,
            owned,
            sets,
        )
    }

    /// The sets that select each cluster, by display name.
    fn selected_by(&self) -> HashMap<ClusterId, Vec<String>> {
        let sets = self.sets.lock();
        let mut by = HashMap::<ClusterId, Vec<String>>::new();
        for (key, status) in &sets.decisions.sets.statuses {
            for id in selected_ids(key, status) {
                by.entry(id).or_default().push(key.to_string());
            }
        }
        by
    }

    /// Every cluster's row, in the registry's order (namespace, then name).
    pub fn fleet_rows(&self) -> Vec<FleetRow> {
        let mut selected_by = self.selected_by();
        let registry = self.registry();
        (registry.clusters())
            .map(|e| self.row_of(e, selected_by.remove(&e.id).unwrap_or_default()))
            .collect()
    }

    /// One cluster in full; `None` for a cluster the hub does not know.
    pub fn cluster_detail(&self, id: &ClusterId) -> Option<ClusterDetail> {
        let registry = self.registry();
        let entry = registry.cluster(id)?;
        let mut sets = Vec::new();
        let mut selected = Vec::new();
        for (key, status) in &self.sets.lock().decisions.sets.statuses {
            let selects = selected_ids(key, status).contains(id);
            let matches = cluster_ids(key, &status.matching_cluster_refs).contains(id);
            if selects {
                selected.push(key.to_string());
            }
            if selects || matches {
                sets.push(Membership {
                    set: key.to_string(),
                    selected: selects,
                });
            }
        }
        let membership = self.membership_labels().remove(id);
        let object = self.member_cluster(entry, membership);
        let (check_history, gaps) = {
            let state = entry.state.lock();
            let changes = state.history.check_changes().into_iter();
            let changes = changes.map(|c| CheckChangeView {
                at: millis(c.at),
                check: c.check.into(),
                passing: c.passing,
                message: c.message.into(),
            });
            let gaps = (state.history.gaps().into_iter()).map(|g| GapView {
                from: millis(g.from),
                to: millis(g.to),
            });
            (changes.collect(), gaps.collect())
        };
        Some(ClusterDetail {
            row: self.row_of(entry, selected),
            object,
            transitions: self.recent_transitions(id),
            check_history,
            gaps,
            sets,
        })
    }
}

fn row(
    entry: &ClusterEntry,
    conditions: &[Condition],
    checks: &[CheckResult],
    last_heard: Option<Timestamp>,
    owned: Option<bool>,
    sets: Vec<String>,
) -> FleetRow {
    let status = |type_| condition::find(conditions, type_).map(|c| Status::parse(&c.status));
    let verdict = |type_| status(type_).unwrap_or(Status::Unknown).as_str();
    let reason = [REACHABLE, READY, HEALTHY]
        .into_iter()
        .find_map(|type_| {
            let c = condition::find(conditions, type_)?;
            (Status::parse(&c.status) != Status::True)
                .then(|| format!("{}={}: {}: {}", c.type_, c.status, c.reason, c.message))
        })
        .unwrap_or_default();
    // An unreachable cluster's last results say nothing about its checks now.
    let reachable = status(REACHABLE) == Some(Status::True);
    let failing = (checks.iter())
        .filter(|c| reachable && !c.passing && c.consecutive_failures > 0)
        .map(|c| FailingCheck {
            name: c.name.clone(),
            message: c.message.clone(),
        })
        .collect();
    FleetRow {
        id: entry.id.to_string(),
        reachable: verdict(REACHABLE),
        ready: verdict(READY),
        healthy: verdict(HEALTHY),
        reason,
        last_heard: last_heard.map(millis),
        failing,
        sets,
        paused: entry.object.spec.paused,
        owned,
    }
}

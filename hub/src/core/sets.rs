//! Set evaluation: every ClusterSet's and Set's next status from the clusters' views, the
//! status it had, the partition brake and `now`. [`select`](super::selection::select)
//! decides each selection; this module keeps what was decided (the statuses, and the next
//! moment a tolerated cluster's toleration runs out) and words the `Satisfied` and
//! `ReassignmentFrozen` conditions and the failover reason.
//!
//! Pure: the shell builds the views, persists the [`SetChange`]s and publishes them.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::condition::{self, HEALTHY, READY, Status};
use fleetpulse_common::api::{ClusterRef, SetSpec, SetStatus};

use super::health::Health;
use super::selection::{self, ClusterView};
use crate::ids::{ClusterId, Scope, SetKey};

/// `Satisfied`: enough eligible clusters are selected.
pub const SATISFIED: &str = "Satisfied";
/// `ReassignmentFrozen`: the partition brake holds the selection.
pub const REASSIGNMENT_FROZEN: &str = "ReassignmentFrozen";

/// One set as evaluation reads it.
#[derive(Clone, Copy, Debug)]
pub struct SetSource<'a> {
    /// Which set.
    pub key: &'a SetKey,
    /// What it asks for.
    pub spec: &'a SetSpec,
    /// Its `metadata.generation`, shown as `observedGeneration`.
    pub generation: Option<i64>,
}

/// A set whose status an evaluation changed.
#[derive(Clone, Debug, PartialEq)]
pub struct SetChange {
    /// Which set.
    pub key: SetKey,
    /// Its new status (to persist and publish).
    pub status: SetStatus,
    /// The clusters dropped for health, each with why (a failover when not empty).
    pub dropped: Vec<(ClusterId, String)>,
    /// Whether the selection itself changed (not only a condition).
    pub moved: bool,
}

/// What set evaluation remembers between evaluations.
#[derive(Clone, Debug, Default)]
pub struct Sets {
    /// Status of every set, as last evaluated.
    pub statuses: BTreeMap<SetKey, SetStatus>,
    /// The earliest time a tolerated selected cluster's toleration runs out.
    next_deadline: Option<Timestamp>,
}

impl Sets {
    /// Evaluates every set in `sets` at `wall` over `views`: the clusters in `held` (held
    /// by a tripped rollout) stay selected where they are, and nothing moves for health
    /// while `frozen`. Forgets sets no longer listed. Returns the sets whose status changed.
    pub fn evaluate<'a>(
        &mut self,
        sets: impl IntoIterator<Item = SetSource<'a>>,
        views: &[ClusterView],
        held: &HashSet<ClusterId>,
        frozen: bool,
        wall: Timestamp,
    ) -> Vec<SetChange> {
        let mut present = HashSet::new();
        let mut deadline: Option<Timestamp> = None;
        let mut changes = Vec::new();
        for SetSource {
            key,
            spec,
            generation,
        } in sets
        {
            let scope = key.scope();
            let previous_status = self.statuses.get(key).cloned().unwrap_or_default();
            let previous = selected_ids(key, &previous_status);
            let out = if held.iter().any(|id| previous.contains(id)) {
                // A cluster a tripped rollout holds stays where it is selected: it counts as
                // eligible for this set only.
                let mut held_views = views.to_vec();
                for v in held_views
                    .iter_mut()
                    .filter(|v| held.contains(&v.id) && previous.contains(&v.id))
                {
                    v.eligible = true;
                    v.ineligible_since = None;
                }
                selection::select(spec, scope, &previous, &held_views, wall, frozen)
            } else {
                selection::select(spec, scope, &previous, views, wall, frozen)
            };
            let status = next_status(spec, &previous_status, &out, frozen, generation, wall);
            deadline = earliest_deadline(deadline, spec, &out.selected, views, wall);
            if status != previous_status {
                self.statuses.insert(key.clone(), status.clone());
                changes.push(SetChange {
                    key: key.clone(),
                    status,
                    moved: out.selected != previous,
                    dropped: out.dropped,
                });
            }
            present.insert(key);
        }
        self.statuses.retain(|k, _| present.contains(k));
        self.next_deadline = deadline;
        changes
    }

    /// Whether a selected cluster's toleration ran out by `wall` since the last
    /// evaluation: the sets must be evaluated again.
    pub fn deadline_passed(&self, wall: Timestamp) -> bool {
        self.next_deadline.is_some_and(|d| d <= wall)
    }

    /// Membership labels per cluster: every set that selects it.
    pub fn membership(&self) -> HashMap<ClusterId, Vec<String>> {
        let mut labels: HashMap<ClusterId, Vec<String>> = HashMap::new();
        for (key, status) in &self.statuses {
            for id in selected_ids(key, status) {
                labels.entry(id).or_default().push(key.label_key());
            }
        }
        labels
    }
}

/// The clusters a set's status selects (a ClusterSet's refs without a namespace name one
/// in `default`; a Set's are in its own namespace).
pub fn selected_ids(key: &SetKey, status: &SetStatus) -> Vec<ClusterId> {
    cluster_ids(key, &status.selected_cluster_refs)
}

/// The clusters `refs` name, in set `key`'s scope (a Set's own namespace when a ref names
/// none; `default` for a ClusterSet).
pub fn cluster_ids(key: &SetKey, refs: &[ClusterRef]) -> Vec<ClusterId> {
    let default_ns = match key.scope() {
        Scope::Namespace(ns) => ns,
        Scope::Fleet => "default",
    };
    (refs.iter())
        .map(|r| ClusterId::new(r.namespace.as_deref().unwrap_or(default_ns), &r.name))
        .collect()
}

/// What selection needs to know of a cluster with these labels and this health: eligible
/// when `Ready` and `Healthy` are both True; otherwise since the later of their
/// transitions away from True, with both named in the reason.
pub fn view(id: ClusterId, labels: BTreeMap<String, String>, health: &Health) -> ClusterView {
    let not_true: Vec<&Condition> = [READY, HEALTHY]
        .into_iter()
        .filter(|t| health.status(t) != Status::True)
        .filter_map(|t| condition::find(health.conditions(), t))
        .collect();
    ClusterView {
        id,
        labels,
        eligible: not_true.is_empty(),
        ineligible_since: not_true.iter().map(|c| c.last_transition_time.0).max(),
        reason: not_true
            .iter()
            .map(|c| format!("{}={} ({})", c.type_, c.status, c.reason))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn refs(ids: &[ClusterId]) -> Vec<ClusterRef> {
    ids.iter()
        .map(|id| ClusterRef {
            namespace: Some(id.namespace.clone()),
            name: id.name.clone(),
            ..Default::default()
        })
        .collect()
}

fn next_status(
    spec: &SetSpec,
    previous: &SetStatus,
    out: &selection::Outcome,
    frozen: bool,
    generation: Option<i64>,
    wall: Timestamp,
) -> SetStatus {
    let mut status = previous.clone();
    status.matching_cluster_refs = refs(&out.matching);
    status.selected_cluster_refs = refs(&out.selected);
    status.observed_generation = generation;
    let max = spec.max_replicas.max(1) as usize;
    let c = &mut status.conditions;
    if !out.held.is_empty() {
        let held: Vec<String> = out.held.iter().map(ToString::to_string).collect();
        let message = format!(
            "no eligible cluster among {} matching; keeping {} selected rather than emptying \
             the set (health alone never empties a set)",
            out.matching.len(),
            held.join(", ")
        );
        condition::set(
            c,
            SATISFIED,
            Status::False,
            "NoEligibleReplacement",
            &message,
            wall,
        );
    } else if out.eligible_selected >= max {
        let message = format!(
            "{} of {max} wanted clusters selected, all eligible",
            out.eligible_selected
        );
        condition::set(
            c,
            SATISFIED,
            Status::True,
            "EnoughEligibleClusters",
            &message,
            wall,
        );
    } else {
        let message = format!(
            "{} of {max} wanted clusters selected and eligible; {} of {} matching clusters are eligible",
            out.eligible_selected,
            out.eligible_matching,
            out.matching.len()
        );
        condition::set(
            c,
            SATISFIED,
            Status::False,
            "NotEnoughEligibleClusters",
            &message,
            wall,
        );
    }
    if frozen {
        let message = "most clusters went quiet at once; this hub assumes it is partitioned and holds the selection";
        condition::set(
            c,
            REASSIGNMENT_FROZEN,
            Status::True,
            "HubPartitioned",
            message,
            wall,
        );
    } else {
        condition::set(
            c,
            REASSIGNMENT_FROZEN,
            Status::False,
            "Normal",
            "reassignment follows cluster health",
            wall,
        );
    }
    if !out.dropped.is_empty() {
        let dropped: Vec<String> = out
            .dropped
            .iter()
            .map(|(id, why)| format!("{id} ({why})"))
            .collect();
        let added: Vec<String> = out.added.iter().map(ToString::to_string).collect();
        let replacement = if added.is_empty() {
            "no eligible replacement".to_owned()
        } else {
            format!("replaced by {}", added.join(", "))
        };
        status.last_failover_time = Some(Time(wall));
        status.last_failover_reason = Some(format!(
            "{} no longer eligible; {replacement}",
            dropped.join(", ")
        ));
    }
    status
}

/// The earliest moment a selected, ineligible but tolerated cluster's toleration runs out
/// (after `now`: a cluster held past its toleration because the set has no eligible
/// replacement sets no deadline, so it does not re-evaluate the sets on every tick).
fn earliest_deadline(
    current: Option<Timestamp>,
    spec: &SetSpec,
    selected: &[ClusterId],
    views: &[ClusterView],
    now: Timestamp,
) -> Option<Timestamp> {
    let toleration =
        k8s_openapi::jiff::SignedDuration::from_secs(spec.failover.toleration_seconds.into());
    views
        .iter()
        .filter(|v| !v.eligible && selected.contains(&v.id))
        .filter_map(|v| {
            v.ineligible_since
                .and_then(|s| s.checked_add(toleration).ok())
        })
        .filter(|deadline| *deadline > now)
        .chain(current)
        .min()
}

//! ClusterSet and Set evaluation on the fleet: builds each cluster's [`ClusterView`], runs
//! [`selection::select`] for every set, keeps and persists the resulting status, and drives
//! the partition [`Brake`]. Evaluation runs at once on any health transition (from the
//! heartbeat path or the detector tick), on reload, on a brake change, and when a
//! selected cluster's toleration runs out; never on a resync timer.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::condition::{self, HEALTHY, READY, Status};
use fleetpulse_common::api::{ClusterRef, SetSpec, SetStatus};
use fleetpulse_common::protocol::report::ClusterId;

use super::{ClusterEntry, Fleet};
use crate::core::brake::{Brake, BrakeEvent, BrakeState};
use crate::core::rollout::RolloutBrake;
use crate::core::selection::{self, ClusterView};
use crate::ids::{Scope, SetKey};
use crate::store::Write;

/// `Satisfied`: enough eligible clusters are selected.
pub const SATISFIED: &str = "Satisfied";
/// `ReassignmentFrozen`: the partition brake holds the selection.
pub const REASSIGNMENT_FROZEN: &str = "ReassignmentFrozen";

/// Set statuses and the brake.
#[derive(Debug)]
pub struct SetsState {
    /// Status of every set, as last evaluated.
    pub statuses: BTreeMap<SetKey, SetStatus>,
    /// The partition brake.
    pub brake: Brake,
    /// The rollout brake.
    pub rollouts: RolloutBrake,
    /// When the brake last changed, on the wall clock.
    pub brake_changed: Option<Timestamp>,
    /// The earliest time a tolerated selected cluster's toleration runs out.
    next_deadline: Option<Timestamp>,
    /// The clusters a tripped rollout held at the last evaluation.
    pub held: HashSet<ClusterId>,
}

impl SetsState {
    /// Empty state with a released brake.
    pub fn new(brake: Brake, rollouts: RolloutBrake) -> Self {
        Self {
            statuses: BTreeMap::new(),
            brake,
            rollouts,
            brake_changed: None,
            next_deadline: None,
            held: HashSet::new(),
        }
    }
}

fn view(entry: &ClusterEntry) -> ClusterView {
    let state = entry.state.lock();
    let conditions = state.health.conditions();
    let not_true: Vec<_> = [READY, HEALTHY]
        .iter()
        .filter_map(|t| condition::find(conditions, t))
        .filter(|c| c.status != "True")
        .collect();
    let missing = [READY, HEALTHY]
        .iter()
        .any(|t| condition::find(conditions, t).is_none());
    ClusterView {
        id: entry.id.clone(),
        labels: entry.object.metadata.labels.clone().unwrap_or_default(),
        eligible: not_true.is_empty() && !missing,
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

impl Fleet {
    /// Re-evaluates every set at `wall` and persists what changed.
    pub fn evaluate_sets(&self, wall: Timestamp) {
        let registry = self.registry();
        // A view of every cluster, only when some set needs it (with no set, a fleet of
        // 10,000 clusters starting up would build it on each of 10,000 first reports).
        let no_sets = registry.cluster_sets().next().is_none() && registry.sets().next().is_none();
        let views: Vec<ClusterView> = if no_sets {
            Vec::new()
        } else {
            registry.clusters().map(|e| view(e)).collect()
        };
        let mut sets = self.sets.lock();
        let frozen = sets.brake.frozen();
        let held = self.rollout_holds(&mut sets, &registry, wall);
        let mut present = Vec::new();
        let mut deadline: Option<Timestamp> = None;
        let mut writes = Vec::new();
        let cluster_sets = registry.cluster_sets().map(|cs| {
            (
                SetKey::of_cluster_set(cs),
                &cs.spec.set,
                cs.metadata.generation,
            )
        });
        let namespaced = registry
            .sets()
            .map(|s| (SetKey::of_set(s), &s.spec, s.metadata.generation));
        for (key, spec, generation) in cluster_sets.chain(namespaced) {
            let scope = key.scope();
            let previous_status = sets.statuses.get(&key).cloned().unwrap_or_default();
            let default_ns = match scope {
                Scope::Namespace(ns) => ns,
                Scope::Fleet => "default",
            };
            let previous: Vec<ClusterId> = previous_status
                .selected_cluster_refs
                .iter()
                .map(|r| ClusterId::new(r.namespace.as_deref().unwrap_or(default_ns), &r.name))
                .collect();
            let out = if held.iter().any(|id| previous.contains(id)) {
                // A cluster a tripped rollout holds stays where it is selected: it counts as
                // eligible for this set only.
                let mut held_views = views.clone();
                for v in held_views
                    .iter_mut()
                    .filter(|v| held.contains(&v.id) && previous.contains(&v.id))
                {
                    v.eligible = true;
                    v.ineligible_since = None;
                }
                selection::select(spec, scope, &previous, &held_views, wall, frozen)
            } else {
                selection::select(spec, scope, &previous, &views, wall, frozen)
            };
            let status = next_status(spec, &previous_status, &out, frozen, generation, wall);
            deadline = earliest_deadline(deadline, spec, &out.selected, &views, wall);
            if status != previous_status {
                if !out.dropped.is_empty() {
                    self.metrics().failover(&key, &out.dropped);
                    tracing::warn!(set = %key, reason = status.last_failover_reason.as_deref().unwrap_or_default(), "failover");
                } else if out.selected != previous {
                    tracing::info!(set = %key, selected = ?out.selected, "selection changed");
                }
                writes.push(Write::Set {
                    key: key.clone(),
                    status: status.clone(),
                });
                sets.statuses.insert(key.clone(), status);
            }
            present.push(key);
        }
        sets.statuses.retain(|k, _| present.contains(k));
        sets.next_deadline = deadline;
        sets.held = held;
        drop(sets);
        self.store.send(writes);
        self.decided.notify_one();
    }

    /// Feeds the brake the tick's `(last heartbeat, grace period)` of every unpaused
    /// cluster; returns whether the sets must be re-evaluated (the brake changed, or a
    /// toleration ran out).
    pub(super) fn drive_brake(
        &self,
        now: Instant,
        wall: Timestamp,
        samples: Vec<(Option<Instant>, Duration)>,
    ) -> bool {
        let settle = samples
            .iter()
            .map(|(_, grace)| *grace)
            .max()
            .unwrap_or_default();
        let mut sets = self.sets.lock();
        let event = sets.brake.observe(now, samples, settle);
        let deadline_passed = sets.next_deadline.is_some_and(|d| d <= wall);
        if event.is_some() {
            sets.brake_changed = Some(wall);
        }
        self.metrics().brake(&sets.brake.state());
        match event {
            Some(BrakeEvent::Engaged) => {
                if let BrakeState::Engaged {
                    late, reporting, ..
                } = sets.brake.state()
                {
                    tracing::error!(
                        late,
                        reporting,
                        "most clusters went quiet at once: assuming this hub is partitioned; set reassignment frozen"
                    );
                }
            }
            Some(BrakeEvent::Released) => {
                drop(sets);
                for e in self.registry().clusters() {
                    e.state.lock().liveness.reset_grace(now);
                }
                tracing::warn!(
                    settle_seconds = settle.as_secs(),
                    "heartbeats returned: every cluster gets a fresh grace period; reassignment stays frozen while it runs"
                );
            }
            Some(BrakeEvent::Settled) => {
                tracing::info!("partition brake released: set reassignment resumes")
            }
            None => {}
        }
        event.is_some() || deadline_passed
    }

    /// Membership labels per cluster: every set that selects it.
    pub fn membership_labels(&self) -> HashMap<ClusterId, Vec<String>> {
        let sets = self.sets.lock();
        let mut labels: HashMap<ClusterId, Vec<String>> = HashMap::new();
        for (key, status) in &sets.statuses {
            for r in &status.selected_cluster_refs {
                let ns = match key {
                    SetKey::Set(id) => id.namespace.clone(),
                    SetKey::ClusterSet(_) => {
                        r.namespace.clone().unwrap_or_else(|| "default".into())
                    }
                };
                labels
                    .entry(ClusterId::new(ns, &r.name))
                    .or_default()
                    .push(key.label_key());
            }
        }
        labels
    }
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

//! ClusterSet and Set evaluation on the fleet: builds each cluster's [`ClusterView`], has
//! the core's fleet-wide part ([`FleetDecisions`]) evaluate every set and observe the
//! partition brake, and carries out the effects: persists, counts and logs them.
//! Evaluation runs at once on any health transition (from the heartbeat path or the
//! detector tick), on reload, on a brake change, and when a selected cluster's toleration
//! runs out; never on a resync timer.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::protocol::report::ClusterId;

use super::{ClusterEntry, Fleet};
use crate::core::brake::{BrakeEvent, BrakeSettings, BrakeState};
use crate::core::fleet::{Effect, FleetDecisions};
use crate::core::rollout::RolloutBrake;
use crate::core::selection::ClusterView;
use crate::core::sets::SetSource;
use crate::ids::SetKey;
use crate::store::Write;

pub use crate::core::sets::{REASSIGNMENT_FROZEN, SATISFIED};

/// Set statuses and the brake.
#[derive(Debug)]
pub struct SetsState {
    /// The fleet-wide decisions: every set's status as last evaluated, the next toleration
    /// deadline, and the partition brake.
    pub decisions: FleetDecisions,
    /// The rollout brake.
    pub rollouts: RolloutBrake,
    /// When the brake last changed, on the wall clock.
    pub brake_changed: Option<Timestamp>,
    /// The clusters a tripped rollout held at the last evaluation.
    pub held: HashSet<ClusterId>,
    /// Each set's recent selections (the console's failover timeline).
    pub timelines: super::timeline::Timelines,
}

impl SetsState {
    /// Empty state with a released brake.
    pub fn new(brake: BrakeSettings, rollouts: RolloutBrake) -> Self {
        Self {
            decisions: FleetDecisions::new(brake),
            rollouts,
            brake_changed: None,
            held: HashSet::new(),
            timelines: Default::default(),
        }
    }
}

/// What the sets see of a cluster: its health as this replica judges it, or, for a
/// cluster of a shard another replica owns (replicas sharing the fleet), its conditions as
/// that replica last wrote them on the MemberCluster (watched by every replica).
fn view(
    entry: &ClusterEntry,
    ownership: Option<&dyn super::Ownership>,
    wall: Timestamp,
) -> ClusterView {
    let labels = entry.object.metadata.labels.clone().unwrap_or_default();
    if ownership.is_some_and(|o| o.term(&entry.id).is_none()) {
        let conditions =
            (entry.object.status.as_ref()).map_or_else(Vec::new, |s| s.conditions.clone());
        let health = crate::core::health::Health::restore(conditions, None, wall);
        return crate::core::sets::view(entry.id.clone(), labels, &health);
    }
    crate::core::sets::view(entry.id.clone(), labels, &entry.state.lock().core.health)
}

impl Fleet {
    /// Replicas sharing the fleet: takes the set statuses as the replica that evaluated the
    /// sets last wrote them (on the watched ClusterSets and Sets) as this replica's own,
    /// before it evaluates and writes the sets itself, so taking the evaluation over moves
    /// no selection (selection is sticky from what was written, not from what this replica
    /// decided while it did not write).
    pub fn adopt_written_set_statuses(&self) {
        let registry = self.registry();
        let written: Vec<_> = (registry.cluster_sets())
            .filter_map(|cs| Some((SetKey::of_cluster_set(cs), cs.status.clone()?)))
            .chain((registry.sets()).filter_map(|s| Some((SetKey::of_set(s), s.status.clone()?))))
            .collect();
        let mut sets = self.sets.lock();
        for (key, status) in written {
            sets.decisions.sets.statuses.insert(key, status);
        }
        // Memberships changed by no evaluation: the feed reads them all again.
        self.changed.lock().mark_all();
    }

    /// Re-evaluates every set at `wall` and persists what changed.
    pub fn evaluate_sets(&self, wall: Timestamp) {
        let registry = self.registry();
        // A view of every cluster, only when some set needs it (with no set, a fleet of
        // 10,000 clusters starting up would build it on each of 10,000 first reports).
        let no_sets = registry.cluster_sets().next().is_none() && registry.sets().next().is_none();
        let views: Vec<ClusterView> = if no_sets {
            Vec::new()
        } else {
            let ownership = self.ownership.get().map(|o| o.as_ref());
            registry
                .clusters()
                .map(|e| view(e, ownership, wall))
                .collect()
        };
        let mut sets = self.sets.lock();
        let held = self.rollout_holds(&mut sets, &registry, wall);
        let keys: Vec<(SetKey, _, _)> = (registry.cluster_sets())
            .map(|cs| {
                (
                    SetKey::of_cluster_set(cs),
                    &cs.spec.set,
                    cs.metadata.generation,
                )
            })
            .chain((registry.sets()).map(|s| (SetKey::of_set(s), &s.spec, s.metadata.generation)))
            .collect();
        let sources = keys.iter().map(|(key, spec, generation)| SetSource {
            key,
            spec,
            generation: *generation,
        });
        let mut effects = Vec::new();
        (sets.decisions).evaluate(sources, &views, &held, wall, &mut effects);
        {
            let mut changed = self.changed.lock();
            for id in sets.held.symmetric_difference(&held) {
                changed.mark(id);
            }
        }
        sets.held = held;
        for effect in &effects {
            if let Effect::Set(change) = effect {
                sets.timelines.record(change, wall);
            }
        }
        let SetsState {
            decisions,
            timelines,
            ..
        } = &mut *sets;
        timelines.retain(|key| decisions.sets.statuses.contains_key(key));
        drop(sets);
        let mut writes = Vec::with_capacity(effects.len());
        for effect in effects {
            // Membership labels follow the set statuses written here (the Kubernetes
            // store's label consumer reads them from there); the mirror feed hears of
            // them cluster by cluster.
            let change = match effect {
                Effect::Set(change) => change,
                Effect::Membership { cluster, labels } => {
                    self.changed.lock().membership(cluster, labels);
                    continue;
                }
                _ => continue,
            };
            if !change.dropped.is_empty() {
                self.metrics().failover(&change.key, &change.dropped);
                let reason = change.status.last_failover_reason.as_deref();
                tracing::warn!(set = %change.key, reason = reason.unwrap_or_default(), "failover");
            } else if change.moved {
                let selected = &change.status.selected_cluster_refs;
                tracing::info!(set = %change.key, ?selected, "selection changed");
            }
            writes.push(Write::Set {
                key: change.key,
                status: change.status,
            });
        }
        self.store.send(writes);
        self.decided.notify_one();
    }

    /// Feeds the brake the tick's `(last heartbeat, grace period)` of every unpaused
    /// cluster and carries out what it decided; returns whether the sets must be
    /// re-evaluated (the brake changed, or a toleration ran out).
    pub(super) fn drive_brake(
        &self,
        now: Instant,
        wall: Timestamp,
        samples: Vec<(Option<Instant>, Duration)>,
    ) -> bool {
        let mut sets = self.sets.lock();
        let mut effects = Vec::new();
        let observed = (sets.decisions).observe(samples, now, wall, &mut effects);
        let brake = sets.decisions.brake.state();
        let ownership = self.ownership.get();
        let elsewhere = ownership.is_some_and(|o| o.brake_elsewhere());
        let flipped = sets.decisions.freeze_elsewhere(elsewhere);
        if let Some(ownership) = ownership {
            ownership.publish_brake(sets.decisions.brake.frozen());
        }
        if !effects.is_empty() {
            sets.brake_changed = Some(wall);
        }
        drop(sets);
        self.metrics().brake(&brake);
        if observed.reset_grace {
            for e in self.registry().clusters() {
                e.state.lock().core.liveness.reset_grace(now);
            }
        }
        for effect in effects {
            match (effect, brake) {
                (
                    Effect::Brake(BrakeEvent::Engaged),
                    BrakeState::Engaged {
                        late, reporting, ..
                    },
                ) => {
                    tracing::error!(
                        late,
                        reporting,
                        "most clusters went quiet at once: assuming this hub is partitioned; set reassignment frozen"
                    );
                }
                (Effect::Brake(BrakeEvent::Released), _) => tracing::warn!(
                    settle_seconds = observed.settle.as_secs(),
                    "heartbeats returned: every cluster gets a fresh grace period; reassignment stays frozen while it runs"
                ),
                (Effect::Brake(BrakeEvent::Settled), _) => {
                    tracing::info!("partition brake released: set reassignment resumes")
                }
                _ => {}
            }
        }
        match (flipped, elsewhere) {
            (true, true) => tracing::error!(
                "another hub replica's partition brake is engaged (most of its clusters went quiet at once); set reassignment frozen here too"
            ),
            (true, false) => tracing::info!(
                "no other hub replica's partition brake is engaged any more; set reassignment follows this replica's brake"
            ),
            _ => {}
        }
        observed.evaluate || flipped
    }

    /// Membership labels per cluster: every set that selects it.
    pub fn membership_labels(&self) -> HashMap<ClusterId, Vec<String>> {
        self.sets.lock().decisions.sets.membership()
    }
}

//! The whole fleet's decisions as one state machine: [`FleetCore::on`] takes an [`Event`]
//! that carries `now` and returns the [`Effect`]s it decided, in order, for the shell to
//! carry out (persist, publish, write to Kubernetes).
//!
//! The decisions are composed once, in two parts: one cluster's ([`ClusterCore`]: what a
//! heartbeat and a detector tick do to it) and the fleet's ([`FleetDecisions`]: the
//! partition brake observing a tick, every set's evaluation and the membership labels it
//! moves). The shell holds the first under each cluster's lock and the second under its
//! sets lock and calls the same functions; `FleetCore` holds them in one place,
//! single-threaded, and words their outcomes as effects, for the failover scenarios, which
//! run against both.
//!
//! Not modelled here: the rollout brake and hub-side checks (no cluster is held by a
//! rollout, and every hub-side check counts as run), and HealthPolicies (a cluster's
//! config is its own heartbeat spec and checks: its generation moves when they change).

mod effect;
mod per_fleet;

pub use effect::Effect;
pub use per_fleet::{FleetDecisions, Observed};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::{MemberCluster, MemberClusterSpec, SetSpec};
use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::replay::Rejection;

use super::brake::{BrakeSettings, BrakeState};
use super::cluster::{ClusterCore, Heartbeat, Report};
use super::health::{Debounce, Health};
use super::sets::{self, SetSource};
use crate::ids::{ClusterId, SetKey, cluster_id};

/// What the fleet's decisions are made of, as they happen.
#[derive(Clone, Debug)]
pub enum Event {
    /// A MemberCluster was added or changed.
    ClusterApplied(Box<MemberCluster>),
    /// A MemberCluster was removed.
    ClusterRemoved(ClusterId),
    /// A ClusterSet or Set was added or changed.
    SetApplied {
        /// Which set.
        key: SetKey,
        /// What it asks for.
        spec: SetSpec,
        /// Its `metadata.generation`.
        generation: Option<i64>,
    },
    /// A ClusterSet or Set was removed.
    SetRemoved(SetKey),
    /// A heartbeat passed every admission step but the replay rule.
    Heartbeat {
        /// The cluster it is for.
        cluster: ClusterId,
        /// The key id it was signed with.
        kid: String,
        /// The report.
        report: Box<Report>,
    },
    /// The detector's tick: every cluster is judged, the brake observes the fleet, and a
    /// passed toleration deadline has the sets evaluated.
    Tick,
}

/// Hub-wide settings the core decides with.
#[derive(Clone, Copy, Debug, Default)]
pub struct CoreSettings {
    /// Debounce of `Healthy`.
    pub debounce: Debounce,
    /// The partition brake.
    pub brake: BrakeSettings,
    /// No incarnation at or below this is accepted.
    pub floor: Option<u64>,
}

#[derive(Clone, Debug)]
struct Member {
    labels: BTreeMap<String, String>,
    spec: MemberClusterSpec,
    config_generation: u64,
    core: ClusterCore,
}

#[derive(Clone, Debug)]
struct SetEntry {
    spec: SetSpec,
    generation: Option<i64>,
}

/// The fleet's decision state.
#[derive(Clone, Debug)]
pub struct FleetCore {
    settings: CoreSettings,
    clusters: BTreeMap<ClusterId, Member>,
    sets: BTreeMap<SetKey, SetEntry>,
    decisions: FleetDecisions,
}

impl FleetCore {
    /// An empty fleet.
    pub fn new(settings: CoreSettings) -> Self {
        Self {
            settings,
            clusters: BTreeMap::new(),
            sets: BTreeMap::new(),
            decisions: FleetDecisions::new(settings.brake),
        }
    }

    /// Applies `event`, which happened at `now` (`wall` on the wall clock), and returns
    /// what it decided.
    pub fn on(&mut self, event: Event, now: Instant, wall: Timestamp) -> Vec<Effect> {
        let mut effects = Vec::new();
        let evaluate = match event {
            Event::ClusterApplied(mc) => self.apply_cluster(*mc, now, wall),
            Event::ClusterRemoved(id) => self.clusters.remove(&id).is_some(),
            Event::SetApplied {
                key,
                spec,
                generation,
            } => {
                self.sets.insert(key, SetEntry { spec, generation });
                true
            }
            Event::SetRemoved(key) => self.sets.remove(&key).is_some(),
            Event::Heartbeat {
                cluster,
                kid,
                report,
            } => self.heartbeat(cluster, &kid, &report, now, wall, &mut effects),
            Event::Tick => self.tick(now, wall, &mut effects),
        };
        if evaluate {
            self.evaluate(wall, &mut effects);
        }
        effects
    }

    /// The config generation the hub serves `cluster` (0: unknown cluster).
    pub fn config_generation(&self, cluster: &ClusterId) -> u64 {
        self.clusters
            .get(cluster)
            .map_or(0, |m| m.config_generation)
    }

    /// A cluster's health conditions.
    pub fn conditions(&self, cluster: &ClusterId) -> Option<&[Condition]> {
        (self.clusters.get(cluster)).map(|m| m.core.health.conditions())
    }

    /// Every set's status, as last evaluated.
    pub fn set_statuses(&self) -> &BTreeMap<SetKey, fleetpulse_common::api::SetStatus> {
        &self.decisions.sets.statuses
    }

    /// The partition brake's state.
    pub fn brake(&self) -> BrakeState {
        self.decisions.brake.state()
    }

    /// Returns whether the sets must be evaluated.
    fn apply_cluster(&mut self, mc: MemberCluster, now: Instant, wall: Timestamp) -> bool {
        let id = cluster_id(&mc);
        let labels = mc.metadata.labels.unwrap_or_default();
        match self.clusters.get_mut(&id) {
            Some(member) => {
                let config = |s: &MemberClusterSpec| {
                    (
                        s.heartbeat.clone(),
                        s.readiness_checks.clone(),
                        s.liveness_checks.clone(),
                    )
                };
                if config(&member.spec) != config(&mc.spec) {
                    member.config_generation += 1;
                }
                member.labels = labels;
                member.spec = mc.spec;
            }
            None => {
                let health = Health::restore(Vec::new(), None, wall);
                let member = Member {
                    labels,
                    spec: mc.spec,
                    config_generation: 1,
                    core: ClusterCore::new(now, health, HashMap::new()),
                };
                self.clusters.insert(id, member);
            }
        }
        true
    }

    /// Returns whether the sets must be evaluated.
    fn heartbeat(
        &mut self,
        cluster: ClusterId,
        kid: &str,
        report: &Report,
        now: Instant,
        wall: Timestamp,
        effects: &mut Vec<Effect>,
    ) -> bool {
        let Some(member) = self.clusters.get_mut(&cluster) else {
            let rejection = Rejection {
                code: RejectCode::UnknownCluster,
                message: format!("no MemberCluster {cluster} exists on this hub"),
                last_accepted: None,
            };
            effects.push(Effect::Refused { cluster, rejection });
            return false;
        };
        let heartbeat = Heartbeat {
            kid,
            report,
            wanted_generation: member.config_generation,
            hub_checks_ran: true,
            paused: member.spec.paused,
            floor: self.settings.floor,
            debounce: self.settings.debounce,
        };
        let shared_before = member.core.sharing.shared();
        let accepted = match member.core.heartbeat(heartbeat, now, wall) {
            Ok(accepted) => accepted,
            Err(rejection) => {
                effects.push(Effect::Refused { cluster, rejection });
                return false;
            }
        };
        effects.push(Effect::Accepted {
            cluster: cluster.clone(),
            position: accepted.position,
            config_generation: member.config_generation,
        });
        if accepted.shared_key != shared_before {
            effects.push(Effect::SharedKey {
                cluster: cluster.clone(),
                shared: accepted.shared_key,
            });
        }
        if accepted.health_changed {
            let conditions = member.core.health.conditions().to_vec();
            effects.push(Effect::Conditions {
                cluster,
                conditions,
            });
        }
        accepted.health_changed
    }

    /// Returns whether the sets must be evaluated.
    fn tick(&mut self, now: Instant, wall: Timestamp, effects: &mut Vec<Effect>) -> bool {
        let mut samples = Vec::with_capacity(self.clusters.len());
        let mut changed = false;
        for (id, member) in &mut self.clusters {
            let spec = &member.spec;
            let ticked = member.core.tick(&spec.heartbeat, spec.paused, now, wall);
            samples.extend(ticked.brake_sample);
            if ticked.changed {
                changed = true;
                let conditions = member.core.health.conditions().to_vec();
                effects.push(Effect::Conditions {
                    cluster: id.clone(),
                    conditions,
                });
            }
        }
        let observed = self.decisions.observe(samples, now, wall, effects);
        if observed.reset_grace {
            for member in self.clusters.values_mut() {
                member.core.liveness.reset_grace(now);
            }
        }
        changed || observed.evaluate
    }

    fn evaluate(&mut self, wall: Timestamp, effects: &mut Vec<Effect>) {
        let views: Vec<_> = (self.clusters.iter())
            .map(|(id, m)| sets::view(id.clone(), m.labels.clone(), &m.core.health))
            .collect();
        let sources = self.sets.iter().map(|(key, set)| SetSource {
            key,
            spec: &set.spec,
            generation: set.generation,
        });
        (self.decisions).evaluate(sources, &views, &HashSet::new(), wall, effects);
    }
}

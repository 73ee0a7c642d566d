//! The fleet-wide part of the decisions, as the shell runs it under its sets lock and
//! [`super::FleetCore`] runs it for the scenarios: the partition brake observing a tick,
//! and every set's evaluation with the membership labels it moves.

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use super::super::brake::{self, Brake, BrakeEvent, BrakeSettings};
use super::super::selection::ClusterView;
use super::super::sets::{SetSource, Sets};
use super::Effect;
use crate::ids::ClusterId;

/// The sets' statuses and the partition brake.
#[derive(Clone, Debug)]
pub struct FleetDecisions {
    /// Every set's status as last evaluated, and the next toleration deadline.
    pub sets: Sets,
    /// The partition brake.
    pub brake: Brake,
    /// Another hub replica's partition brake is frozen (replicas sharing the fleet): set
    /// reassignment is frozen here too.
    pub frozen_elsewhere: bool,
}

/// What the brake's observation of a tick decided.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The brake released: every cluster gets a fresh grace period from now.
    pub reset_grace: bool,
    /// The sets must be evaluated (the brake changed, or a toleration ran out).
    pub evaluate: bool,
    /// How long the brake settles after a release (the longest grace period).
    pub settle: Duration,
}

impl FleetDecisions {
    /// No set evaluated yet, the brake released.
    pub fn new(brake: BrakeSettings) -> Self {
        Self {
            sets: Sets::default(),
            brake: Brake::new(brake),
            frozen_elsewhere: false,
        }
    }

    /// Whether set reassignment is frozen: by this hub's brake, or another replica's.
    pub fn frozen(&self) -> bool {
        self.brake.frozen() || self.frozen_elsewhere
    }

    /// Takes whether another replica's brake is frozen; returns whether that changed (the
    /// sets must then be evaluated).
    pub fn freeze_elsewhere(&mut self, frozen: bool) -> bool {
        std::mem::replace(&mut self.frozen_elsewhere, frozen) != frozen
    }

    /// Has the brake observe a tick's `(last heartbeat, grace period)` of every unpaused
    /// cluster. Pushes `Brake` when it changed.
    pub fn observe(
        &mut self,
        samples: Vec<(Option<Instant>, Duration)>,
        now: Instant,
        wall: Timestamp,
        effects: &mut Vec<Effect>,
    ) -> Observed {
        let settle = brake::settle(&samples);
        let event = self.brake.observe(now, samples, settle);
        effects.extend(event.map(Effect::Brake));
        Observed {
            reset_grace: event == Some(BrakeEvent::Released),
            evaluate: event.is_some() || self.sets.deadline_passed(wall),
            settle,
        }
    }

    /// Evaluates every set of `sets` at `wall` over `views`, the clusters in `held` held
    /// where a tripped rollout keeps them. Pushes a `Set` for each status that changed,
    /// then a `Membership` for each cluster whose membership labels changed (taken by
    /// difference: a removed set changes no status but takes its label off its clusters).
    pub fn evaluate<'a>(
        &mut self,
        sets: impl IntoIterator<Item = SetSource<'a>>,
        views: &[ClusterView],
        held: &HashSet<ClusterId>,
        wall: Timestamp,
        effects: &mut Vec<Effect>,
    ) {
        let before = self.sets.membership();
        let frozen = self.frozen();
        let changes = self.sets.evaluate(sets, views, held, frozen, wall);
        effects.extend(changes.into_iter().map(Effect::Set));
        let after = self.sets.membership();
        let clusters: BTreeSet<&ClusterId> = before.keys().chain(after.keys()).collect();
        for id in clusters {
            let labels = after.get(id);
            if before.get(id) != labels {
                effects.push(Effect::Membership {
                    cluster: id.clone(),
                    labels: labels.cloned().unwrap_or_default(),
                });
            }
        }
    }
}

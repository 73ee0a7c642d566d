//! One cluster's decisions: what an admitted heartbeat and a detector tick do to its
//! liveness, its health conditions, its accepted positions and the key-sharing watch.
//!
//! Pure: every input carries `now`; the shell keeps the state under the cluster's lock,
//! records what a report says for the read API, and persists and publishes what changed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::HeartbeatSpec;
use fleetpulse_common::protocol::replay::{self, Position, Rejection};
use fleetpulse_common::protocol::report::{CheckResult, HeartbeatReport};

use super::detector::{Detector, Liveness, Reachability};
use super::health::{Debounce, Evidence, Health};
use super::shared_key::SharedKey;

/// A heartbeat report as the hub holds it: its check results shared, not copied, with the
/// cluster's state that records them and with the next report that signs the same text.
pub type Report = HeartbeatReport<Arc<[CheckResult]>>;

/// The decision state of one cluster.
#[derive(Clone, Debug)]
pub struct ClusterCore {
    /// Failure-detector state.
    pub liveness: Liveness,
    /// Conditions and debounce memory.
    pub health: Health,
    /// Last accepted `(incarnation, seq)` per key id.
    pub positions: HashMap<String, Position>,
    /// Whether two agents seem to share the cluster's key.
    pub sharing: SharedKey,
}

/// A heartbeat that passed every admission step but the replay rule, with what the hub
/// knows that judging it needs.
#[derive(Clone, Copy, Debug)]
pub struct Heartbeat<'a> {
    /// The key id it was signed with.
    pub kid: &'a str,
    /// The report (with any hub-side check results joined to the agent's).
    pub report: &'a Report,
    /// The config generation the hub serves the cluster.
    pub wanted_generation: u64,
    /// Whether every hub-side check of the cluster has a result.
    pub hub_checks_ran: bool,
    /// A paused cluster's conditions do not follow its reports.
    pub paused: bool,
    /// No incarnation at or below this is accepted (a start that may have lost positions).
    pub floor: Option<u64>,
    /// The debounce of `Healthy`.
    pub debounce: Debounce,
}

/// What accepting a heartbeat decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The position accepted.
    pub position: Position,
    /// Whether a health condition changed.
    pub health_changed: bool,
    /// Whether the key now looks shared by two running agents.
    pub shared_key: bool,
}

/// What a detector tick decided for one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticked {
    /// The detector's verdict.
    pub verdict: Reachability,
    /// Whether a health condition changed (the cluster became unreachable).
    pub changed: bool,
    /// What the partition brake hears of the cluster (last heartbeat, grace period);
    /// `None` for a paused cluster, which the brake ignores.
    pub brake_sample: Option<(Option<Instant>, Duration)>,
}

impl ClusterCore {
    /// A cluster first seen at `now` with `health` and the `positions` it had.
    pub fn new(now: Instant, health: Health, positions: HashMap<String, Position>) -> Self {
        Self {
            liveness: Liveness::new(now),
            health,
            positions,
            sharing: SharedKey::default(),
        }
    }

    /// Applies a heartbeat received at `now`: the replay rule (and the restart floor) first,
    /// which changes nothing when it refuses; then the position, liveness, health and the
    /// key-sharing watch.
    pub fn heartbeat(
        &mut self,
        heartbeat: Heartbeat<'_>,
        now: Instant,
        wall: Timestamp,
    ) -> Result<Accepted, Rejection> {
        let Heartbeat {
            kid,
            report,
            wanted_generation,
            hub_checks_ran,
            paused,
            floor,
            debounce,
        } = heartbeat;
        // One lookup: the key's slot is read, then overwritten in place (no key-id
        // allocation per heartbeat once a key is known).
        let slot = self.positions.get_mut(kid);
        let last = slot.as_deref().copied();
        let claimed = Position {
            incarnation: report.incarnation,
            seq: report.seq,
        };
        let position = replay::check_sequence(claimed, last)?;
        replay::check_floor(position, floor)?;
        match slot {
            Some(known) => *known = position,
            None => {
                self.positions.insert(kid.to_owned(), position);
            }
        }
        self.liveness.heartbeat(now);
        let evidence = Evidence::of(report.config_generation, wanted_generation, hub_checks_ran);
        let health_changed = !paused && self.health.report(report, evidence, debounce, wall);
        let shared_key = self.sharing.accepted(last, position);
        Ok(Accepted {
            position,
            health_changed,
            shared_key,
        })
    }

    /// Judges the cluster at `now` with the detector its `spec` asks for; a paused
    /// cluster's conditions stay as they are.
    pub fn tick(
        &mut self,
        spec: &HeartbeatSpec,
        paused: bool,
        now: Instant,
        wall: Timestamp,
    ) -> Ticked {
        let grace = spec.grace_period_seconds;
        let verdict = self.liveness.judge(now, &Detector::for_spec(spec));
        let changed = !paused && self.health.observe(verdict, grace, wall);
        let brake_sample = (!paused).then(|| {
            let grace_period = Duration::from_secs(grace.into());
            (
                self.liveness.brake_last_heartbeat(grace_period),
                grace_period,
            )
        });
        Ticked {
            verdict,
            changed,
            brake_sample,
        }
    }
}

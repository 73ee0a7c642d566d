//! Failover scenarios on a virtual clock, with hand-made reports and ticks: no network,
//! no sleeping. The scenarios run twice: against the pure core ([`FleetCore`], events in
//! and effects out) and against the real [`Fleet`] that runs the same decisions under
//! per-cluster locks, so both must decide the same. A few tests read what only one of
//! them has: the core's effects, the fleet's metrics.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use fleetpulse_common::api::condition::{self, REACHABLE, Status};
use fleetpulse_common::api::{ClusterSet, MemberCluster, SetStatus};
use fleetpulse_common::protocol::report::{ClusterId, HeartbeatReport};
use fleetpulse_hub::core::brake::{BrakeEvent, BrakeState};
use fleetpulse_hub::core::fleet::{CoreSettings, Effect, Event, FleetCore};
use fleetpulse_hub::fleet::{Fleet, Objects, Settings, shared};
use fleetpulse_hub::ids::SetKey;
use fleetpulse_hub::testing;

const INTERVAL: u64 = 10;

/// What a scenario needs of a hub: the fleet, or the core alone.
trait Hub {
    fn start(clusters: Vec<MemberCluster>, set: ClusterSet, now: Instant, wall: Timestamp) -> Self;
    /// The config generation the hub serves `cluster`.
    fn generation(&self, cluster: &ClusterId) -> u64;
    /// Accepts `report` (it must be).
    fn heartbeat(
        &mut self,
        cluster: &ClusterId,
        report: HeartbeatReport,
        now: Instant,
        wall: Timestamp,
    );
    fn tick(&mut self, now: Instant, wall: Timestamp);
    fn replace_set(&mut self, set: ClusterSet, now: Instant, wall: Timestamp);
    fn set_status(&self) -> Option<SetStatus>;
    fn reachable(&self, cluster: &ClusterId) -> Status;
    /// `Released`, `Engaged` or `Settling`.
    fn brake(&self) -> String;
}

struct OnFleet {
    fleet: Fleet,
    objects: Objects,
}

impl Hub for OnFleet {
    fn start(clusters: Vec<MemberCluster>, set: ClusterSet, now: Instant, wall: Timestamp) -> Self {
        let fleet = testing::fleet_in_memory(Settings::default());
        let objects = Objects {
            member_clusters: shared(clusters),
            cluster_sets: shared(vec![set]),
            ..Default::default()
        };
        fleet.reload(objects.clone(), now, wall);
        OnFleet { fleet, objects }
    }

    fn generation(&self, cluster: &ClusterId) -> u64 {
        let entry = self
            .fleet
            .registry()
            .cluster(cluster)
            .cloned()
            .expect("registered");
        self.fleet.config(&entry).generation
    }

    fn heartbeat(
        &mut self,
        cluster: &ClusterId,
        report: HeartbeatReport,
        now: Instant,
        wall: Timestamp,
    ) {
        let entry = self
            .fleet
            .registry()
            .cluster(cluster)
            .cloned()
            .expect("registered");
        let admitted = testing::admitted(entry, report);
        self.fleet
            .accept(&admitted, now, wall)
            .expect("a fresh report is accepted");
    }

    fn tick(&mut self, now: Instant, wall: Timestamp) {
        self.fleet.tick(now, wall);
    }

    fn replace_set(&mut self, set: ClusterSet, now: Instant, wall: Timestamp) {
        self.objects.cluster_sets = shared([set]);
        self.fleet.reload(self.objects.clone(), now, wall);
    }

    fn set_status(&self) -> Option<SetStatus> {
        self.fleet.cluster_sets()[0].status.clone()
    }

    fn reachable(&self, cluster: &ClusterId) -> Status {
        let mcs = self.fleet.member_clusters();
        let mc = mcs
            .iter()
            .find(|m| m.metadata.name.as_deref() == Some(&cluster.name))
            .unwrap();
        let conds = &mc.status.as_ref().unwrap().conditions;
        Status::parse(&condition::find(conds, REACHABLE).unwrap().status)
    }

    fn brake(&self) -> String {
        self.fleet.hub_status().partition_brake.state
    }
}

struct OnCore {
    core: FleetCore,
    /// Every effect the core returned, in order.
    effects: Vec<Effect>,
}

impl OnCore {
    fn on(&mut self, event: Event, now: Instant, wall: Timestamp) {
        let effects = self.core.on(event, now, wall);
        self.effects.extend(effects);
    }
}

impl Hub for OnCore {
    fn start(clusters: Vec<MemberCluster>, set: ClusterSet, now: Instant, wall: Timestamp) -> Self {
        let core = FleetCore::new(CoreSettings::default());
        let mut hub = OnCore {
            core,
            effects: Vec::new(),
        };
        for mc in clusters {
            hub.on(Event::ClusterApplied(Box::new(mc)), now, wall);
        }
        hub.replace_set(set, now, wall);
        hub
    }

    fn generation(&self, cluster: &ClusterId) -> u64 {
        self.core.config_generation(cluster)
    }

    fn heartbeat(
        &mut self,
        cluster: &ClusterId,
        report: HeartbeatReport,
        now: Instant,
        wall: Timestamp,
    ) {
        let event = Event::Heartbeat {
            cluster: cluster.clone(),
            kid: "k".into(),
            report: Box::new(report.into_shared()),
        };
        let effects = self.core.on(event, now, wall);
        assert!(
            matches!(effects.first(), Some(Effect::Accepted { .. })),
            "a fresh report is accepted: {effects:?}"
        );
        self.effects.extend(effects);
    }

    fn tick(&mut self, now: Instant, wall: Timestamp) {
        self.on(Event::Tick, now, wall);
    }

    fn replace_set(&mut self, set: ClusterSet, now: Instant, wall: Timestamp) {
        let event = Event::SetApplied {
            key: SetKey::of_cluster_set(&set),
            generation: set.metadata.generation,
            spec: set.spec.set,
        };
        self.on(event, now, wall);
    }

    fn set_status(&self) -> Option<SetStatus> {
        self.core.set_statuses().values().next().cloned()
    }

    fn reachable(&self, cluster: &ClusterId) -> Status {
        let conds = self.core.conditions(cluster).expect("registered");
        Status::parse(&condition::find(conds, REACHABLE).unwrap().status)
    }

    fn brake(&self) -> String {
        match self.core.brake() {
            BrakeState::Released => "Released",
            BrakeState::Engaged { .. } => "Engaged",
            BrakeState::Settling { .. } => "Settling",
        }
        .into()
    }
}

/// A fleet of clusters `c0`..`cN` heart-beating every 10 s (grace 40 s), cluster `i` at
/// seconds `s` with `s % 10 == (i + 1) % 10` (so `c0` reports at 1, 11, 21, ...), with one
/// ClusterSet over all of them.
struct Sim<H> {
    hub: H,
    t0: Instant,
    w0: Timestamp,
    now: u64,
    seqs: HashMap<usize, u64>,
    ids: Vec<ClusterId>,
    failovers_seen: Vec<(u64, Vec<String>)>,
}

fn cluster(name: &str) -> MemberCluster {
    testing::cluster(&format!("fleet/{name}"))
        .label("env", "prod")
        .interval(INTERVAL as u32)
        .grace(40)
        .generation(1)
        .build()
}

fn cluster_set(max: u32, toleration: u32) -> ClusterSet {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet",
        "metadata": {"name": "primary"},
        "spec": {"clusterSelector": {"matchLabels": {"env": "prod"}}, "maxReplicas": max,
                 "failover": {"tolerationSeconds": toleration}}
    }))
    .unwrap()
}

impl<H: Hub> Sim<H> {
    fn new(n: usize, set: ClusterSet) -> Sim<H> {
        let ids = (0..n)
            .map(|i| ClusterId::new("fleet", format!("c{i}")))
            .collect();
        let clusters = (0..n).map(|i| cluster(&format!("c{i}"))).collect();
        let (t0, w0) = (Instant::now(), Timestamp::now());
        Sim {
            hub: H::start(clusters, set, t0, w0),
            t0,
            w0,
            now: 0,
            seqs: HashMap::new(),
            ids,
            failovers_seen: vec![],
        }
    }

    fn wall(&self, s: u64) -> Timestamp {
        self.w0 + SignedDuration::from_secs(s as i64)
    }

    fn at(&self) -> (Instant, Timestamp) {
        (self.t0 + Duration::from_secs(self.now), self.wall(self.now))
    }

    fn heartbeat(&mut self, i: usize) {
        let seq = {
            let seq = self.seqs.entry(i).or_default();
            *seq += 1;
            *seq
        };
        let (at, wall) = self.at();
        // The agent reports with the config the hub serves, as a real one does after its
        // first pull.
        let report = testing::report(&self.ids[i])
            .seq(seq)
            .at(wall)
            .uid(&format!("uid-{i}"))
            .interval(INTERVAL as u32)
            .generation(self.hub.generation(&self.ids[i]))
            .build();
        let id = self.ids[i].clone();
        self.hub.heartbeat(&id, report, at, wall);
    }

    /// Advances second by second to `end`: every cluster for which `alive(i, s)` holds sends a
    /// heartbeat at its phase, then the hub ticks.
    fn run_until(&mut self, end: u64, alive: impl Fn(usize, u64) -> bool) {
        while self.now < end {
            self.now += 1;
            for i in 0..self.ids.len() {
                if self.now % INTERVAL == (i as u64 + 1) % INTERVAL && alive(i, self.now) {
                    self.heartbeat(i);
                }
            }
            let before = self.selected();
            let (at, wall) = self.at();
            self.hub.tick(at, wall);
            let after = self.selected();
            if after != before {
                self.failovers_seen.push((self.now, after));
            }
        }
    }

    fn status(&self) -> SetStatus {
        self.hub.set_status().expect("the set was evaluated")
    }

    fn selected(&self) -> Vec<String> {
        (self
            .hub
            .set_status()
            .unwrap_or_default()
            .selected_cluster_refs
            .iter())
        .map(|r| r.name.clone())
        .collect()
    }

    fn reachable(&self, i: usize) -> Status {
        self.hub.reachable(&self.ids[i])
    }

    fn brake(&self) -> String {
        self.hub.brake()
    }

    fn replace_set(&mut self, set: ClusterSet) {
        let (at, wall) = self.at();
        self.hub.replace_set(set, at, wall);
    }
}

/// Each scenario as a test on the fleet and a test on the core.
macro_rules! on_the_fleet_and_on_the_core {
    ($($scenario:ident),* $(,)?) => {
        mod on_the_fleet {
            $(#[test]
            fn $scenario() {
                super::$scenario::<super::OnFleet>();
            })*
        }
        mod on_the_core {
            $(#[test]
            fn $scenario() {
                super::$scenario::<super::OnCore>();
            })*
        }
    };
}

on_the_fleet_and_on_the_core!(
    a_dead_primary_is_replaced_in_the_tick_that_finds_it_unreachable,
    a_dead_primary_is_replaced_exactly_when_its_toleration_runs_out,
    shrinking_from_three_to_one_keeps_exactly_one,
    a_flapping_primary_causes_at_most_one_reassignment_per_toleration_window,
    most_clusters_going_quiet_at_once_freezes_reassignment_and_a_fresh_grace_follows,
    a_long_partition_freezes_sets_and_a_cluster_still_silent_is_replaced_after_settling,
    both_clusters_of_an_active_passive_pair_going_quiet_engage_the_brake_and_keep_the_set,
    with_no_eligible_replacement_the_last_selected_cluster_stays_selected,
);

fn a_dead_primary_is_replaced_in_the_tick_that_finds_it_unreachable<H: Hub>() {
    let mut sim = Sim::<H>::new(3, cluster_set(1, 0));
    sim.run_until(60, |_, _| true);
    assert_eq!(sim.selected(), ["c0"]);
    // c0's last heartbeat is at t=51; it then stops.
    let mut unreachable_at = None;
    let mut replaced_at = None;
    while sim.now < 200 {
        let end = sim.now + 1;
        sim.run_until(end, |i, _| i != 0);
        if unreachable_at.is_none() && sim.reachable(0) == Status::False {
            unreachable_at = Some(sim.now);
        }
        if replaced_at.is_none() && sim.selected() == ["c1"] {
            replaced_at = Some(sim.now);
        }
    }
    assert_eq!(
        unreachable_at,
        Some(92),
        "more than 40 s after the last heartbeat at 51"
    );
    assert_eq!(
        replaced_at, unreachable_at,
        "replaced in the same evaluation, not after a resync"
    );
    let status = sim.status();
    assert!(status.last_failover_reason.unwrap().contains("fleet/c0"));
}

fn a_dead_primary_is_replaced_exactly_when_its_toleration_runs_out<H: Hub>() {
    let mut sim = Sim::<H>::new(3, cluster_set(1, 30));
    sim.run_until(60, |_, _| true);
    sim.run_until(121, |i, _| i != 0);
    assert_eq!(
        sim.selected(),
        ["c0"],
        "unreachable at 92, tolerated for 30 s"
    );
    sim.run_until(122, |i, _| i != 0);
    assert_eq!(sim.selected(), ["c1"]);
    assert_eq!(sim.failovers_seen.last().unwrap().0, 122);
}

fn shrinking_from_three_to_one_keeps_exactly_one<H: Hub>() {
    let mut sim = Sim::<H>::new(4, cluster_set(3, 0));
    sim.run_until(30, |_, _| true);
    assert_eq!(sim.selected(), ["c0", "c1", "c2"]);
    sim.replace_set(cluster_set(1, 0));
    assert_eq!(sim.selected(), ["c0"], "applied at once on the set change");
}

fn a_flapping_primary_causes_at_most_one_reassignment_per_toleration_window<H: Hub>() {
    // Every 80 s, c0 reports for 30 s and is silent for 50 s: unreachable for about 10 s and
    // unhealthy for about 20 s of each cycle, for 20 minutes.
    let flapping = |i: usize, s: u64| i != 0 || s < 60 || s % 80 < 30;
    for toleration in [0u32, 30, 120] {
        let mut sim = Sim::<H>::new(3, cluster_set(1, toleration));
        sim.run_until(60, |_, _| true);
        assert_eq!(sim.selected(), ["c0"]);
        sim.run_until(60 + 1200, flapping);
        let reassignments = sim.failovers_seen.iter().filter(|(t, _)| *t > 60).count();
        if toleration == 0 {
            assert_eq!(
                reassignments, 1,
                "replaced once; without failback it never swaps back: {:?}",
                sim.failovers_seen
            );
        } else {
            assert_eq!(
                reassignments, 0,
                "down ~20 s at a time is within a {toleration} s toleration"
            );
        }
    }
}

fn most_clusters_going_quiet_at_once_freezes_reassignment_and_a_fresh_grace_follows<H: Hub>() {
    let mut sim = Sim::<H>::new(10, cluster_set(3, 0));
    sim.run_until(60, |_, _| true);
    assert_eq!(sim.selected(), ["c0", "c1", "c2"]);
    // From t=60, c0..c5 fall silent (the hub's side of a short partition). c0..c4 are heard
    // again from t=90, c5 only from t=105: by then 49 s have passed since its last heartbeat
    // at 56, more than its grace period.
    let alive = |i: usize, s: u64| i >= 6 || (i < 5 && s >= 90) || s >= 105;
    let mut ever_unreachable = vec![];
    while sim.now < 200 {
        let end = sim.now + 1;
        sim.run_until(end, alive);
        ever_unreachable.extend((0..10).filter(|&i| sim.reachable(i) == Status::False));
        if sim.now == 80 {
            assert_eq!(
                sim.brake(),
                "Engaged",
                "engaged once half a grace period passed in silence"
            );
        }
        if sim.now == 100 {
            assert_eq!(sim.brake(), "Settling", "released when heartbeats returned");
        }
    }
    assert!(
        ever_unreachable.is_empty(),
        "a fresh grace period after the release: {ever_unreachable:?}"
    );
    assert_eq!(sim.brake(), "Released");
    assert_eq!(
        sim.selected(),
        ["c0", "c1", "c2"],
        "no reassignment at any point"
    );
    assert!(
        sim.failovers_seen.iter().all(|(t, _)| *t <= 60),
        "{:?}",
        sim.failovers_seen
    );
}

fn a_long_partition_freezes_sets_and_a_cluster_still_silent_is_replaced_after_settling<H: Hub>() {
    let mut sim = Sim::<H>::new(10, cluster_set(1, 0));
    sim.run_until(60, |_, _| true);
    assert_eq!(sim.selected(), ["c0"]);
    // c0..c5 silent from 60; everyone but c0 returns at 200.
    let alive = |i: usize, s: u64| i != 0 && (i >= 6 || s >= 200);
    sim.run_until(199, alive);
    assert_eq!(
        sim.reachable(0),
        Status::False,
        "the truth as the hub sees it"
    );
    assert_eq!(sim.brake(), "Engaged");
    assert_eq!(sim.selected(), ["c0"], "frozen");
    let status = sim.status();
    let frozen = status
        .conditions
        .iter()
        .find(|c| c.type_ == "ReassignmentFrozen")
        .unwrap();
    assert_eq!(
        (frozen.status.as_str(), frozen.reason.as_str()),
        ("True", "HubPartitioned")
    );
    // c1 returns at 202: 5 of 10 heard since the brake engaged, so it releases and settles
    // for a grace period (until 242); only then may c0 be replaced.
    sim.run_until(241, alive);
    assert_eq!(sim.brake(), "Settling");
    assert_eq!(sim.selected(), ["c0"], "frozen while settling");
    sim.run_until(242, alive);
    assert_eq!(sim.brake(), "Released");
    assert_eq!(sim.selected(), ["c1"]);
}

#[test]
fn the_clusters_gauge_counts_each_condition_status_at_the_last_tick() {
    let mut sim = Sim::<OnFleet>::new(3, cluster_set(1, 0));
    sim.run_until(100, |i, s| i != 0 || s < 60);
    let metrics = sim.hub.fleet.encode_metrics();
    for (line, count) in [
        (r#"condition="Reachable",status="True""#, 2),
        (r#"condition="Reachable",status="False""#, 1),
        (r#"condition="Reachable",status="Unknown""#, 0),
    ] {
        let expected = format!("fleetpulse_hub_clusters{{{line}}} {count}");
        assert!(
            metrics.lines().any(|l| l == expected),
            "no line {expected:?} in:\n{metrics}"
        );
    }
}

fn both_clusters_of_an_active_passive_pair_going_quiet_engage_the_brake_and_keep_the_set<H: Hub>() {
    let mut sim = Sim::<H>::new(2, cluster_set(1, 0));
    sim.run_until(60, |_, _| true);
    assert_eq!(sim.selected(), ["c0"]);
    // What the hub sees when it is itself cut off from a fleet of two.
    sim.run_until(300, |_, _| false);
    assert_eq!(sim.brake(), "Engaged", "two of two going quiet at once");
    assert_eq!(
        sim.selected(),
        ["c0"],
        "the set is neither emptied nor moved"
    );
    assert_eq!(
        sim.reachable(0),
        Status::False,
        "the detector still tells the truth"
    );
}

fn with_no_eligible_replacement_the_last_selected_cluster_stays_selected<H: Hub>() {
    let mut sim = Sim::<H>::new(3, cluster_set(1, 0));
    sim.run_until(60, |_, _| true);
    assert_eq!(sim.selected(), ["c0"]);
    // c1 and c2 die, then the selected c0 does, each long after the other (so the brake
    // never sees two go quiet at once).
    let alive = |i: usize, s: u64| s < [300, 60, 150][i];
    sim.run_until(500, alive);
    assert_eq!(sim.brake(), "Released");
    assert_eq!(sim.reachable(0), Status::False);
    assert_eq!(sim.selected(), ["c0"], "health alone never empties a set");
    let status = sim.status();
    let satisfied = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Satisfied")
        .unwrap();
    assert_eq!(
        (satisfied.status.as_str(), satisfied.reason.as_str()),
        ("False", "NoEligibleReplacement")
    );
    assert!(
        satisfied.message.contains("fleet/c0"),
        "{}",
        satisfied.message
    );
    // When c1 comes back, it replaces the dead c0.
    sim.run_until(600, |i, _| i == 1);
    assert_eq!(sim.selected(), ["c1"]);
}

#[test]
fn a_failover_on_the_core_is_the_transition_then_the_set_then_the_labels_that_move() {
    let mut sim = Sim::<OnCore>::new(3, cluster_set(1, 0));
    sim.run_until(60, |_, _| true);
    let label = SetKey::ClusterSet("primary".into()).label_key();
    let (c0, c1) = (sim.ids[0].clone(), sim.ids[1].clone());
    assert!(sim.hub.effects.contains(&Effect::Membership {
        cluster: c0.clone(),
        labels: vec![label.clone()]
    }));
    // c0's last heartbeat is at 51; at 92 it is unreachable and replaced by c1.
    sim.run_until(91, |i, _| i != 0);
    let before = sim.hub.effects.len();
    sim.run_until(92, |i, _| i != 0);
    // c1 and c2's heartbeats of the second aside.
    let effects: Vec<Effect> = (sim.hub.effects[before..].iter())
        .filter(|e| !matches!(e, Effect::Accepted { .. }))
        .cloned()
        .collect();
    let [
        Effect::Conditions {
            cluster,
            conditions,
        },
        Effect::Set(change),
        Effect::Membership {
            cluster: left,
            labels: left_labels,
        },
        Effect::Membership {
            cluster: joined,
            labels: joined_labels,
        },
    ] = effects.as_slice()
    else {
        panic!("one transition, one set change and two label changes: {effects:#?}");
    };
    assert_eq!(cluster, &c0);
    let reachable = condition::find(conditions, REACHABLE).unwrap();
    assert_eq!(
        (reachable.status.as_str(), reachable.reason.as_str()),
        ("False", "HeartbeatMissed")
    );
    assert_eq!(change.key, SetKey::ClusterSet("primary".into()));
    assert_eq!(
        change.dropped.iter().map(|(id, _)| id).collect::<Vec<_>>(),
        [&c0]
    );
    assert!(change.moved);
    assert_eq!((left, left_labels.as_slice()), (&c0, &[][..]));
    assert_eq!((joined, joined_labels.as_slice()), (&c1, &[label][..]));
}

#[test]
fn the_core_refuses_a_replayed_heartbeat_and_changes_nothing() {
    let mut sim = Sim::<OnCore>::new(1, cluster_set(1, 0));
    sim.run_until(30, |_, _| true);
    let (at, wall) = sim.at();
    let report = testing::report(&sim.ids[0])
        .seq(1)
        .at(wall)
        .uid("uid-0")
        .build();
    let event = Event::Heartbeat {
        cluster: sim.ids[0].clone(),
        kid: "k".into(),
        report: Box::new(report.into_shared()),
    };
    let statuses = sim.hub.core.set_statuses().clone();
    let effects = sim.hub.core.on(event, at, wall);
    let [Effect::Refused { cluster, rejection }] = effects.as_slice() else {
        panic!("refused alone: {effects:?}");
    };
    assert_eq!(cluster, &sim.ids[0]);
    assert!(
        rejection.message.contains("older than the last accepted"),
        "{}",
        rejection.message
    );
    assert_eq!(sim.hub.core.set_statuses(), &statuses);
}

#[test]
fn the_core_engages_and_releases_the_brake_as_effects() {
    let mut sim = Sim::<OnCore>::new(10, cluster_set(3, 0));
    sim.run_until(60, |_, _| true);
    sim.run_until(200, |i, s| i >= 6 || s >= 90);
    let brakes: Vec<&BrakeEvent> = (sim.hub.effects.iter())
        .filter_map(|e| match e {
            Effect::Brake(b) => Some(b),
            _ => None,
        })
        .collect();
    assert_eq!(
        brakes,
        [
            &BrakeEvent::Engaged,
            &BrakeEvent::Released,
            &BrakeEvent::Settled
        ]
    );
}

#[test]
fn removing_a_set_on_the_core_takes_its_label_off_the_clusters_it_selected() {
    let mut sim = Sim::<OnCore>::new(2, cluster_set(1, 0));
    sim.run_until(30, |_, _| true);
    assert_eq!(sim.selected(), ["c0"]);
    let (at, wall) = sim.at();
    let key = SetKey::ClusterSet("primary".into());
    let effects = sim.hub.core.on(Event::SetRemoved(key), at, wall);
    assert_eq!(
        effects,
        [Effect::Membership {
            cluster: sim.ids[0].clone(),
            labels: vec![]
        }]
    );
    assert!(sim.hub.core.set_statuses().is_empty());
}

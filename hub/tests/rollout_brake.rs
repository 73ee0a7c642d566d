//! The rollout brake on a virtual clock: four clusters, a ClusterSet selecting two, and a
//! HealthPolicy change whose new check fails on three of them. Without the brake the set
//! would fail over on the change alone; with it the selection holds, the policy says
//! `Degraded`, and an acknowledgement (or a fix) lets reassignment follow health again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;

use fleetpulse_common::api::{CheckKind, CheckPhase, ClusterSet, HealthPolicy};
use fleetpulse_common::protocol::report::{CheckResult, ClusterId};
use fleetpulse_hub::fleet::rollouts::{ACKNOWLEDGE_ANNOTATION, DEGRADED};
use fleetpulse_hub::fleet::{Change, Fleet, Objects, Settings, shared};
use fleetpulse_hub::testing;

struct Sim {
    fleet: Fleet,
    t0: Instant,
    w0: Timestamp,
    now: u64,
    seq: u64,
    ids: Vec<ClusterId>,
}

fn cluster_set() -> ClusterSet {
    serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet",
        "metadata": {"name": "primary"},
        "spec": {"clusterSelector": {"matchLabels": {"env": "prod"}}, "maxReplicas": 2}
    }))
    .unwrap()
}

fn policy(check: &str, generation: i64, ack: Option<&str>) -> HealthPolicy {
    let mut p: HealthPolicy = serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "HealthPolicy",
        "metadata": {"name": "platform", "namespace": "fleet"},
        "spec": {"clusterSelector": {"matchLabels": {"env": "prod"}},
                 "livenessChecks": [{"name": check, "readyNodes": {"minCount": 1}}]}
    }))
    .unwrap();
    p.metadata.generation = Some(generation);
    if let Some(ack) = ack {
        p.metadata.annotations = Some(BTreeMap::from([(
            ACKNOWLEDGE_ANNOTATION.to_owned(),
            ack.to_owned(),
        )]));
    }
    p
}

fn result(name: &str, passing: bool) -> CheckResult {
    CheckResult {
        name: name.into(),
        kind: CheckKind::ReadyNodes,
        phase: CheckPhase::Liveness,
        passing,
        message: String::new(),
        since: None,
        consecutive_failures: u32::from(!passing),
        success_rate_percent: None,
    }
}

impl Sim {
    fn new() -> Sim {
        Sim::with_policies(vec![])
    }

    /// The fleet loaded at once with `policies` (as a hub starting with them).
    fn with_policies(policies: Vec<HealthPolicy>) -> Sim {
        let fleet = testing::fleet_in_memory(Settings::default());
        let ids: Vec<ClusterId> = (0..4)
            .map(|i| ClusterId::new("fleet", format!("c{i}")))
            .collect();
        let clusters = ids.iter().map(|id| {
            testing::cluster(&id.to_string())
                .label("env", "prod")
                .interval(10)
                .grace(40)
                .build()
        });
        let objects = Objects {
            member_clusters: shared(clusters),
            cluster_sets: shared([cluster_set()]),
            health_policies: shared(policies),
            ..Default::default()
        };
        let (t0, w0) = (Instant::now(), Timestamp::now());
        assert!(fleet.reload(objects, t0, w0).is_empty());
        Sim {
            fleet,
            t0,
            w0,
            now: 0,
            seq: 0,
            ids,
        }
    }

    fn clock(&self) -> (Instant, Timestamp) {
        let at = self.t0 + Duration::from_secs(self.now);
        (at, self.w0 + SignedDuration::from_secs(self.now as i64))
    }

    /// Ten seconds pass; every cluster reports, those in `failing` with check `check`
    /// failing (and passing elsewhere, when `check` is given).
    fn round(&mut self, check: Option<&str>, failing: &[usize]) {
        self.now += 10;
        self.seq += 1;
        let (at, wall) = self.clock();
        for (i, id) in self.ids.iter().enumerate() {
            let entry = self.fleet.registry().cluster(id).cloned().unwrap();
            let checks = check
                .map(|c| vec![result(c, !failing.contains(&i))])
                .unwrap_or_default();
            let report = testing::report(id)
                .seq(self.seq)
                .at(wall)
                .generation(self.fleet.config(&entry).generation)
                .checks(checks)
                .build();
            self.fleet
                .accept(&testing::admitted(entry, report), at, wall)
                .expect("accepted");
        }
        self.fleet.tick(at, wall);
    }

    fn change_policy(&mut self, policy: HealthPolicy) {
        let (at, wall) = self.clock();
        let key = ("fleet".to_owned(), "platform".to_owned());
        let problems = self.fleet.apply(
            vec![Change::HealthPolicy(key, Some(std::sync::Arc::new(policy)))],
            at,
            wall,
        );
        assert!(problems.is_empty(), "{problems:?}");
    }

    fn selected(&self) -> Vec<String> {
        let status = self.fleet.cluster_sets()[0].status.clone().unwrap();
        status
            .selected_cluster_refs
            .into_iter()
            .map(|r| r.name)
            .collect()
    }

    fn degraded(&self) -> Option<String> {
        let policies = self.fleet.health_policies();
        let status = policies[0].status.clone()?;
        status
            .conditions
            .into_iter()
            .find(|c| c.type_ == DEGRADED && c.status == "True")
            .map(|c| c.message)
    }

    /// A fleet where every cluster is Ready and Healthy and the policy's first version
    /// (check `nodes`, passing everywhere) is in effect.
    fn settled() -> Sim {
        let mut sim = Sim::new();
        sim.change_policy(policy("nodes", 1, None));
        for _ in 0..3 {
            sim.round(Some("nodes"), &[]);
        }
        assert_eq!(sim.selected(), ["c0", "c1"]);
        sim
    }
}

#[test]
fn a_change_that_fails_most_clusters_it_reaches_holds_the_selection_and_marks_the_policy() {
    let mut sim = Sim::settled();
    sim.change_policy(policy("dns", 2, None));
    for _ in 0..3 {
        sim.round(Some("dns"), &[0, 1, 2]);
    }
    assert_eq!(
        sim.selected(),
        ["c0", "c1"],
        "the change alone moves nothing"
    );
    let message = sim.degraded().expect("the policy is Degraded");
    assert!(message.contains("\"dns\" fails on 3 of the 4"), "{message}");
    assert!(
        message.contains(&format!("{ACKNOWLEDGE_ANNOTATION}=2")),
        "{message}"
    );
    assert!(
        sim.fleet
            .encode_metrics()
            .contains("fleetpulse_hub_rollout_brake_engaged 1")
    );

    // The operator says the failures are real: reassignment follows health again.
    sim.change_policy(policy("dns", 2, Some("2")));
    sim.round(Some("dns"), &[0, 1, 2]);
    assert_eq!(sim.degraded(), None);
    assert!(
        sim.selected().contains(&"c3".to_owned()),
        "{:?}",
        sim.selected()
    );
    assert!(
        sim.fleet
            .encode_metrics()
            .contains("fleetpulse_hub_rollout_brake_engaged 0")
    );
}

#[test]
fn a_fix_releases_the_brake_and_is_watched_afresh() {
    let mut sim = Sim::settled();
    sim.change_policy(policy("dns", 2, None));
    for _ in 0..3 {
        sim.round(Some("dns"), &[0, 1, 2]);
    }
    assert!(sim.degraded().is_some());
    sim.change_policy(policy("dns-fixed", 3, None));
    for _ in 0..3 {
        sim.round(Some("dns-fixed"), &[]);
    }
    assert_eq!(sim.degraded(), None);
    assert_eq!(sim.selected(), ["c0", "c1"]);
}

#[test]
fn a_change_failing_a_minority_fails_those_clusters_over_as_usual() {
    let mut sim = Sim::settled();
    sim.change_policy(policy("dns", 2, None));
    for _ in 0..3 {
        sim.round(Some("dns"), &[0]);
    }
    assert_eq!(sim.degraded(), None, "1 of 4 is not more than half");
    assert_eq!(sim.selected(), ["c1", "c2"]);
}

#[test]
fn checks_in_effect_when_the_hub_starts_are_not_a_rollout() {
    let mut sim = Sim::with_policies(vec![policy("dns", 1, None)]);
    for _ in 0..3 {
        sim.round(Some("dns"), &[]);
    }
    assert_eq!(sim.selected(), ["c0", "c1"]);
    for _ in 0..3 {
        sim.round(Some("dns"), &[0, 1, 2]);
    }
    assert_eq!(sim.degraded(), None);
    assert!(
        sim.selected().contains(&"c3".to_owned()),
        "{:?}",
        sim.selected()
    );
}

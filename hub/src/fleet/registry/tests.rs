use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use fleetpulse_common::api::{
    AgentPublicKey, AgentSpec, ClusterCheck, HealthPolicySpec, MemberClusterSpec, ReadyNodesCheck,
};
use fleetpulse_common::protocol::keys;

use super::*;

fn wall() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

fn state(_: &ClusterId) -> Arc<Mutex<ClusterState>> {
    Arc::new(Mutex::new(ClusterState::restore(
        Instant::now(),
        wall(),
        None,
        HashMap::new(),
    )))
}

fn cluster(ns: &str, name: &str, tier: &str, key: &str) -> Arc<MemberCluster> {
    let spec = MemberClusterSpec {
        agent: AgentSpec {
            public_keys: vec![AgentPublicKey {
                public_key: key.to_owned(),
                revoked: false,
            }],
        },
        ..Default::default()
    };
    let mut mc = MemberCluster::new(name, spec);
    mc.metadata.namespace = Some(ns.into());
    mc.metadata.labels = Some(BTreeMap::from([("tier".to_owned(), tier.to_owned())]));
    Arc::new(mc)
}

fn policy(ns: &str, name: &str, tier: &str, check: &str) -> Arc<HealthPolicy> {
    let spec = HealthPolicySpec {
        cluster_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("tier".to_owned(), tier.to_owned())])),
            ..Default::default()
        }),
        liveness_checks: vec![ClusterCheck {
            name: check.into(),
            ready_nodes: Some(ReadyNodesCheck::default()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut p = HealthPolicy::new(name, spec);
    p.metadata.namespace = Some(ns.into());
    Arc::new(p)
}

fn key() -> String {
    keys::public_key_string(&keys::generate().verifying_key())
}

/// `n` clusters over ten namespaces, each with its own key.
fn fleet_of(n: usize) -> Objects {
    Objects {
        member_clusters: (0..n)
            .map(|i| cluster(&format!("ns-{}", i % 10), &format!("c{i}"), "prod", &key()))
            .collect(),
        health_policies: vec![policy("ns-3", "platform", "prod", "nodes")],
        ..Default::default()
    }
}

fn liveness_names(registry: &Registry, id: &ClusterId) -> Vec<String> {
    let entry = registry.cluster(id).expect("cluster present");
    let config = registry.config(entry);
    config.liveness_checks.into_iter().map(|c| c.name).collect()
}

#[test]
fn one_member_cluster_change_rebuilds_its_entry_only_and_shares_every_other() {
    let (before, _) = Registry::build(&fleet_of(10_000), state, wall());
    let changed = ClusterId::new("ns-7", "c17");
    let relabelled = cluster("ns-7", "c17", "dev", &key());
    let (after, applied) = before.apply(
        vec![Change::MemberCluster(changed.clone(), Some(relabelled))],
        state,
        wall(),
    );
    assert_eq!(applied.rebuilt, std::slice::from_ref(&changed));
    let shared = after
        .clusters()
        .zip(before.clusters())
        .filter(|(a, b)| Arc::ptr_eq(a, b))
        .count();
    assert_eq!(
        shared, 9_999,
        "every other entry is the same object as before"
    );
    assert_eq!(
        after
            .cluster(&changed)
            .unwrap()
            .object
            .metadata
            .labels
            .as_ref()
            .unwrap()["tier"],
        "dev"
    );
    // The old registry is untouched: a reader holding it sees the state before.
    assert_eq!(
        before
            .cluster(&changed)
            .unwrap()
            .object
            .metadata
            .labels
            .as_ref()
            .unwrap()["tier"],
        "prod"
    );
}

#[test]
fn a_policy_change_rebuilds_the_clusters_of_its_namespace_only() {
    let (before, _) = Registry::build(&fleet_of(1_000), state, wall());
    let (after, applied) = before.apply(
        vec![Change::HealthPolicy(
            ("ns-3".into(), "platform".into()),
            Some(policy("ns-3", "platform", "prod", "dns")),
        )],
        state,
        wall(),
    );
    assert_eq!(applied.rebuilt.len(), 100);
    assert!(applied.rebuilt.iter().all(|id| id.namespace == "ns-3"));
    assert_eq!(
        liveness_names(&after, &ClusterId::new("ns-3", "c3")),
        ["dns"]
    );
    assert!(liveness_names(&after, &ClusterId::new("ns-4", "c4")).is_empty());
    let status = &after.health_policies()[0].status.clone().unwrap();
    assert_eq!(status.matched_clusters, 100);
}

#[test]
fn changes_applied_one_by_one_end_where_a_fresh_build_of_the_result_does() {
    let shared_key = key();
    let a = ClusterId::new("fleet", "a");
    let b = ClusterId::new("fleet", "b");
    let steps = vec![
        Change::MemberCluster(b.clone(), Some(cluster("fleet", "b", "prod", &shared_key))),
        Change::HealthPolicy(
            ("fleet".into(), "p".into()),
            Some(policy("fleet", "p", "prod", "nodes")),
        ),
        // `a` sorts first, so it takes the shared key from `b`.
        Change::MemberCluster(a.clone(), Some(cluster("fleet", "a", "prod", &shared_key))),
        Change::MemberCluster(
            ClusterId::new("fleet", "c"),
            Some(cluster("fleet", "c", "dev", &key())),
        ),
        // `a` leaves: the key goes back to `b`, and the policy counts one cluster.
        Change::MemberCluster(a.clone(), None),
    ];
    let mut incremental = Registry::default();
    let mut problems = Vec::new();
    for step in steps {
        let (next, applied) = incremental.apply(vec![step], state, wall());
        problems.extend(applied.problems);
        incremental = next;
    }
    assert_eq!(
        problems.len(),
        1,
        "the shared key is reported once: {problems:?}"
    );

    let objects = Objects {
        member_clusters: incremental.clusters().map(|e| e.object.clone()).collect(),
        health_policies: incremental.policies.values().cloned().collect(),
        ..Default::default()
    };
    let (fresh, _) = Registry::build(&objects, state, wall());
    let ids = |r: &Registry| r.clusters().map(|e| e.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&incremental), ids(&fresh));
    // The lookup by id agrees with the listing: the deleted cluster is gone from both.
    assert!(
        incremental.cluster(&a).is_none(),
        "{a} is still found by id"
    );
    for entry in fresh.clusters() {
        let other = incremental.cluster(&entry.id).unwrap();
        assert_eq!(other.config_hash, entry.config_hash, "{}", entry.id);
    }
    let kid = KeyId::of(&keys::parse_public_key(&shared_key).unwrap()).0;
    assert_eq!(incremental.key(&kid).unwrap().entry.id, b);
    assert_eq!(fresh.key(&kid).unwrap().entry.id, b);
    let matched = |r: &Registry| {
        r.health_policies()[0]
            .status
            .clone()
            .unwrap()
            .matched_clusters
    };
    assert_eq!(matched(&incremental), 1);
    assert_eq!(matched(&fresh), 1);
}

#[test]
fn a_full_reload_of_unchanged_objects_is_no_change() {
    let objects = fleet_of(100);
    let (registry, _) = Registry::build(&objects, state, wall());
    assert!(registry.diff(&objects).is_empty());
    // Equal values in new `Arc`s (as a manifest file read again) are no change either.
    let copied = Objects {
        member_clusters: objects
            .member_clusters
            .iter()
            .map(|mc| Arc::new((**mc).clone()))
            .collect(),
        ..objects.clone()
    };
    assert!(registry.diff(&copied).is_empty());
    let fewer = Objects {
        member_clusters: objects.member_clusters[1..].to_vec(),
        ..objects
    };
    let changes = registry.diff(&fewer);
    assert!(matches!(&changes[..], [Change::MemberCluster(id, None)] if id.name == "c0"));
}

#[test]
fn a_policy_whose_lua_does_not_compile_is_refused_and_the_previous_version_stays() {
    let (before, _) = Registry::build(&fleet_of(20), state, wall());
    let mut broken = (*policy("ns-3", "platform", "prod", "lua")).clone();
    broken.spec.liveness_checks[0].ready_nodes = None;
    broken.spec.liveness_checks[0].condition = Some("function evaluate()\n  return {\nend".into());
    let key = ("ns-3".to_owned(), "platform".to_owned());
    let (after, applied) = before.apply(
        vec![Change::HealthPolicy(key, Some(Arc::new(broken)))],
        state,
        wall(),
    );
    assert_eq!(applied.problems.len(), 1, "{:?}", applied.problems);
    assert!(
        applied.problems[0].contains("HealthPolicy ns-3/platform"),
        "{:?}",
        applied.problems
    );
    assert!(
        applied.rebuilt.is_empty(),
        "no cluster takes the broken check"
    );
    assert_eq!(
        liveness_names(&after, &ClusterId::new("ns-3", "c3")),
        ["nodes"]
    );
    let status = after.health_policies()[0].status.clone().unwrap();
    let accepted = &status.conditions[0];
    assert_eq!(
        (accepted.status.as_str(), accepted.reason.as_str()),
        ("False", "ConditionDoesNotCompile")
    );
    assert!(
        accepted.message.contains("condition:3"),
        "names the line: {}",
        accepted.message
    );
    assert!(
        accepted.message.contains("previous version stays"),
        "{}",
        accepted.message
    );
}

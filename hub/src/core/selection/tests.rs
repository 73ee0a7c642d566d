use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use fleetpulse_common::api::{ClusterRef, FailoverPolicy, SetSpec};

use super::*;
use crate::ids::Scope;

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap()
}

fn id(name: &str) -> ClusterId {
    ClusterId::new("fleet", name)
}

fn healthy(name: &str) -> ClusterView {
    ClusterView {
        id: id(name),
        labels: BTreeMap::from([("env".into(), "prod".into())]),
        eligible: true,
        ineligible_since: None,
        reason: String::new(),
    }
}

fn down(name: &str, since: i64) -> ClusterView {
    ClusterView {
        eligible: false,
        ineligible_since: Some(t(since)),
        reason: "Healthy=False (Unreachable)".into(),
        ..healthy(name)
    }
}

fn with_label(mut c: ClusterView, k: &str, v: &str) -> ClusterView {
    c.labels.insert(k.into(), v.into());
    c
}

fn spec(max: u32, toleration: u32) -> SetSpec {
    SetSpec {
        cluster_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("env".into(), "prod".into())])),
            ..Default::default()
        }),
        cluster_refs: vec![],
        max_replicas: max,
        failover: FailoverPolicy {
            toleration_seconds: toleration,
            ..Default::default()
        },
    }
}

fn names(ids: &[ClusterId]) -> Vec<&str> {
    ids.iter().map(|i| i.name.as_str()).collect()
}

#[test]
fn first_evaluation_fills_in_name_order() {
    let out = select(
        &spec(2, 0),
        Scope::Fleet,
        &[],
        &[healthy("c"), healthy("a"), healthy("b")],
        t(0),
        false,
    );
    assert_eq!(names(&out.selected), ["a", "b"]);
    assert_eq!(names(&out.matching), ["a", "b", "c"]);
    assert_eq!(names(&out.added), ["a", "b"]);
    assert_eq!(out.eligible_selected, 2);
}

#[test]
fn a_dead_primary_is_replaced_in_the_same_evaluation_without_toleration() {
    let out = select(
        &spec(1, 0),
        Scope::Fleet,
        &[id("a")],
        &[down("a", 0), healthy("b")],
        t(0),
        false,
    );
    assert_eq!(names(&out.selected), ["b"]);
    assert_eq!(
        out.dropped,
        [(id("a"), "Healthy=False (Unreachable)".to_owned())]
    );
}

#[test]
fn a_dead_primary_is_kept_within_its_toleration_and_replaced_after() {
    let clusters = [down("a", 100), healthy("b")];
    let s = spec(1, 30);
    let within = select(&s, Scope::Fleet, &[id("a")], &clusters, t(129), false);
    assert_eq!(names(&within.selected), ["a"]);
    assert!(within.dropped.is_empty());
    let after = select(&s, Scope::Fleet, &[id("a")], &clusters, t(130), false);
    assert_eq!(names(&after.selected), ["b"]);
}

#[test]
fn shrinking_from_three_to_one_keeps_exactly_one_eligible_cluster() {
    let clusters = [down("a", 0), healthy("b"), healthy("c")];
    let out = select(
        &spec(1, 600),
        Scope::Fleet,
        &[id("a"), id("b"), id("c")],
        &clusters,
        t(10),
        false,
    );
    assert_eq!(
        names(&out.selected),
        ["b"],
        "the tolerated but ineligible one goes first"
    );
}

#[test]
fn selection_is_sticky_without_failback_and_follows_priority_with_it() {
    let clusters = [healthy("a"), with_label(healthy("z"), "prio", "10")];
    let mut s = spec(1, 0);
    s.failover.priority_label = Some("prio".into());
    let sticky = select(&s, Scope::Fleet, &[id("a")], &clusters, t(0), false);
    assert_eq!(
        names(&sticky.selected),
        ["a"],
        "a recovered or new cluster does not displace"
    );
    let fresh = select(&s, Scope::Fleet, &[], &clusters, t(0), false);
    assert_eq!(names(&fresh.selected), ["z"], "priority first, then name");
    s.failover.failback = true;
    let failback = select(&s, Scope::Fleet, &[id("a")], &clusters, t(0), false);
    assert_eq!(names(&failback.selected), ["z"]);
}

#[test]
fn empty_selector_matches_nothing_and_refs_are_deduplicated() {
    let mut s = spec(3, 0);
    s.cluster_selector = Some(LabelSelector::default());
    let clusters = [healthy("a"), healthy("b")];
    assert!(
        select(&s, Scope::Fleet, &[], &clusters, t(0), false)
            .matching
            .is_empty()
    );
    s.cluster_selector = spec(3, 0).cluster_selector;
    s.cluster_refs = vec![ClusterRef {
        namespace: Some("fleet".into()),
        name: "a".into(),
        ..Default::default()
    }];
    let out = select(&s, Scope::Fleet, &[], &clusters, t(0), false);
    assert_eq!(names(&out.matching), ["a", "b"]);
}

#[test]
fn a_set_sees_only_its_namespace_and_refs_default_to_it() {
    let mut other = healthy("x");
    other.id = ClusterId::new("other", "x");
    let mut s = spec(5, 0);
    s.cluster_selector = None;
    s.cluster_refs = vec![
        ClusterRef {
            name: "a".into(),
            ..Default::default()
        },
        ClusterRef {
            namespace: Some("other".into()),
            name: "x".into(),
            ..Default::default()
        },
    ];
    let out = select(
        &s,
        Scope::Namespace("fleet"),
        &[],
        &[healthy("a"), other],
        t(0),
        false,
    );
    assert_eq!(names(&out.selected), ["a"]);
}

#[test]
fn frozen_selection_changes_nothing_for_health_but_honours_the_operator() {
    let clusters = [down("a", 0), healthy("b"), healthy("c")];
    let out = select(
        &spec(2, 0),
        Scope::Fleet,
        &[id("a")],
        &clusters,
        t(1000),
        true,
    );
    assert_eq!(names(&out.selected), ["a"], "no drop, no fill while frozen");
    let shrunk = select(
        &spec(1, 0),
        Scope::Fleet,
        &[id("b"), id("c")],
        &clusters,
        t(1000),
        true,
    );
    assert_eq!(names(&shrunk.selected), ["b"]);
}

#[test]
fn not_enough_eligible_clusters_selects_what_there_is() {
    let out = select(
        &spec(3, 0),
        Scope::Fleet,
        &[],
        &[healthy("a"), down("b", 0)],
        t(0),
        false,
    );
    assert_eq!(names(&out.selected), ["a"]);
    assert_eq!((out.eligible_selected, out.eligible_matching), (1, 1));
}

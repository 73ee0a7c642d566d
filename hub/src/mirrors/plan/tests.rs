use super::*;
use fleetpulse_common::api::MirrorTaintEffect;

fn input(reachable: bool, healthy: bool, sets: &[&str]) -> MirrorInput {
    MirrorInput {
        reachable,
        healthy,
        memberships: sets.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn mirror(kind: MirrorKind) -> MirrorRef {
    MirrorRef::new(kind.api_version(), kind.kind(), "edge-1")
}

#[test]
fn a_healthy_selected_cluster_gets_true_labels_and_its_membership_and_no_taint() {
    let kind = MirrorKind::KarmadaCluster;
    let wanted = plan(
        kind,
        &mirror(kind),
        &input(true, true, &["clusterset.fleetpulse.io/prod"]),
    );
    assert_eq!(
        wanted.labels,
        BTreeMap::from([
            (
                "clusterset.fleetpulse.io/prod".to_owned(),
                "selected".to_owned()
            ),
            (HEALTHY_LABEL.to_owned(), "true".to_owned()),
            (REACHABLE_LABEL.to_owned(), "true".to_owned()),
        ])
    );
    assert_eq!(wanted.taint, TaintPlan::Absent);
}

#[test]
fn an_unhealthy_cluster_is_tainted_with_the_effect_its_tool_reads() {
    let down = input(false, false, &[]);
    let cases = [
        (
            MirrorKind::OcmManagedCluster,
            None,
            TaintPlan::Present("NoSelect"),
        ),
        (
            MirrorKind::KarmadaCluster,
            None,
            TaintPlan::Present("NoSchedule"),
        ),
        (
            MirrorKind::KarmadaCluster,
            Some(MirrorTaintEffect::NoExecute),
            TaintPlan::Present("NoExecute"),
        ),
        (
            MirrorKind::KubeFleetMemberCluster,
            None,
            TaintPlan::Present("NoSchedule"),
        ),
        (MirrorKind::SveltosCluster, None, TaintPlan::NotManaged),
        (MirrorKind::CapiCluster, None, TaintPlan::NotManaged),
        (MirrorKind::ArgoCdSecret, None, TaintPlan::NotManaged),
    ];
    for (kind, effect, expected) in cases {
        let mut m = mirror(kind);
        m.taint_effect = effect;
        let wanted = plan(kind, &m, &down);
        assert_eq!(wanted.taint, expected, "{kind:?}");
        assert_eq!(wanted.labels[HEALTHY_LABEL], "false");
        assert_eq!(wanted.labels[REACHABLE_LABEL], "false");
    }
    let reachable_but_failing = plan(
        MirrorKind::OcmManagedCluster,
        &mirror(MirrorKind::OcmManagedCluster),
        &input(true, false, &[]),
    );
    assert_eq!(reachable_but_failing.taint, TaintPlan::Present("NoSelect"));
    assert_eq!(reachable_but_failing.labels[REACHABLE_LABEL], "true");
}

fn observed(labels: &[(&str, &str)], owned: &[&str]) -> Observed {
    Observed {
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        owned_labels: owned.iter().map(|k| (*k).to_owned()).collect(),
        ..Observed::default()
    }
}

#[test]
fn labels_are_applied_only_when_a_wanted_one_differs_or_an_owned_one_is_no_longer_wanted() {
    let kind = MirrorKind::SveltosCluster;
    let wanted = plan(
        kind,
        &mirror(kind),
        &input(true, true, &["set.fleetpulse.io/web"]),
    );
    let all = [
        (REACHABLE_LABEL, "true"),
        (HEALTHY_LABEL, "true"),
        ("set.fleetpulse.io/web", "selected"),
        ("team", "payments"),
    ];
    assert!(!labels_need_apply(
        &wanted,
        &observed(&all, &[REACHABLE_LABEL])
    ));
    let flipped = [(REACHABLE_LABEL, "true"), (HEALTHY_LABEL, "false")];
    assert!(labels_need_apply(&wanted, &observed(&flipped, &[])));
    let left_set = plan(kind, &mirror(kind), &input(true, true, &[]));
    assert!(labels_need_apply(
        &left_set,
        &observed(&all, &["set.fleetpulse.io/web"])
    ));
    // A membership label someone else owns is theirs: not a reason to write.
    assert!(!labels_need_apply(&left_set, &observed(&all, &[])));
}

#[test]
fn owned_label_keys_come_from_apply_entries_of_the_manager_only() {
    let fields = json!([
        {"manager": "fleetpulse-hub", "operation": "Apply",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}}}},
        {"manager": "fleetpulse-hub", "operation": "Update",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:c": {}}}}},
        {"manager": "kubectl", "operation": "Apply",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:d": {}}}}}
    ]);
    let keys: Vec<String> = owned_label_keys(&fields, "fleetpulse-hub")
        .into_iter()
        .collect();
    assert_eq!(keys, ["a", "b"]);
}

#[test]
fn the_taint_list_changes_only_in_fleetpulses_own_entry() {
    let now = "2026-12-01T12:00:00Z";
    let theirs = json!({"key": "cluster.karmada.io/not-ready", "effect": "NoSchedule"});
    let kind = MirrorKind::KarmadaCluster;
    let added = taints_after(
        kind,
        TaintPlan::Present("NoExecute"),
        std::slice::from_ref(&theirs),
        now,
    )
    .expect("the taint is added");
    assert_eq!(
        added,
        [
            theirs.clone(),
            json!({"key": UNHEALTHY_TAINT, "effect": "NoExecute", "timeAdded": now})
        ]
    );
    assert_eq!(
        taints_after(kind, TaintPlan::Present("NoExecute"), &added, now),
        None,
        "already there: no write"
    );
    let changed = taints_after(kind, TaintPlan::Present("NoSchedule"), &added, now).unwrap();
    assert_eq!(changed[1]["effect"], "NoSchedule");
    let removed = taints_after(kind, TaintPlan::Absent, &added, now).unwrap();
    assert_eq!(removed, std::slice::from_ref(&theirs));
    assert_eq!(taints_after(kind, TaintPlan::Absent, &removed, now), None);
    let fleet = taints_after(
        MirrorKind::KubeFleetMemberCluster,
        TaintPlan::Present("NoSchedule"),
        &[],
        now,
    )
    .unwrap();
    assert_eq!(
        fleet,
        [json!({"key": UNHEALTHY_TAINT, "effect": "NoSchedule"})],
        "KubeFleet's Taint has no timeAdded"
    );
    assert_eq!(taints_after(kind, TaintPlan::NotManaged, &added, now), None);
}

#[test]
fn an_object_is_read_into_labels_owned_keys_taints_and_version() {
    let obj = json!({"metadata": {"resourceVersion": "42", "labels": {"a": "1"},
        "managedFields": [{"manager": "m", "operation": "Apply",
                           "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}}}}]},
        "spec": {"taints": [{"key": "k", "effect": "NoSelect"}]}});
    let seen = Observed::from_object(&obj, "m");
    assert_eq!(seen.resource_version, "42");
    assert_eq!(seen.labels["a"], "1");
    assert!(seen.owned_labels.contains("a"));
    assert_eq!(seen.taints.len(), 1);
}

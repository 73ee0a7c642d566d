//! The mirror writer against kubesim through the real kube client, with the test CRDs of
//! the mirrored tools installed: labels moved by server-side apply while another manager's
//! labels and taints stay, the taint added and removed, a conflicting writer retried, a
//! missing object reported then written once it exists, an unknown kind reported without
//! a request, the partition brake holding every write (and shown on a write already
//! waiting), and the writes counted.

#[path = "mirrors_writer/fixture.rs"]
mod fixture;

use std::time::Duration;

use fleetpulse_common::api::{MirrorRef, MirrorTaintEffect};
use fleetpulse_hub::mirrors::{MirrorInput, MirrorKind, MirrorState};
use fleetpulse_kubesim::eventually;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use fixture::*;

#[tokio::test]
async fn membership_labels_move_between_sveltosclusters_and_argocd_secrets_leaving_other_labels() {
    let mut f = fixture(Duration::from_secs(3600)).await;
    let sveltos = MirrorKind::SveltosCluster;
    let secret = MirrorKind::ArgoCdSecret;
    for name in ["east", "west"] {
        create(&f.sim, sveltos, Some("fleet"), name, json!({})).await;
        let argo = json!({"metadata": {"labels": {"argocd.argoproj.io/secret-type": "cluster"}}});
        create(&f.sim, secret, Some("argocd"), name, argo).await;
    }
    let mirrors = |name: &str| {
        vec![
            mirror(sveltos, name, None),
            mirror(secret, name, Some("argocd")),
        ]
    };
    let handle = f.handle.clone();
    let observe = |name: &str, state: MirrorInput| {
        handle.observe(cluster(name), &mirrors(name), &[], &state);
    };
    observe("east", input(true, true, &[PROD]));
    observe("west", input(true, true, &[]));
    settled(&f, &cluster("east"), MirrorState::Written).await;
    settled(&f, &cluster("west"), MirrorState::Written).await;
    assert_eq!(next_change(&mut f).await.condition.status, "True");
    let east = labels(&object(&f.sim, secret, Some("argocd"), "east").await);
    assert_eq!(east[PROD], "selected");
    assert_eq!(
        (east[HEALTHY].as_str(), east[REACHABLE].as_str()),
        ("true", "true")
    );
    assert_eq!(east["argocd.argoproj.io/secret-type"], "cluster");
    let writes_at_start = (
        patches(&f.sim, "sveltosclusters"),
        patches(&f.sim, "secrets"),
    );
    assert_eq!(writes_at_start, (2, 2), "one apply per object");

    // The same verdict again writes nothing; then east fails and west takes its place.
    observe("east", input(true, true, &[PROD]));
    observe("east", input(false, false, &[]));
    observe("west", input(true, true, &[PROD]));
    let moved = eventually(WAIT, || async {
        let east = labels(&object(&f.sim, sveltos, Some("fleet"), "east").await);
        let west = labels(&object(&f.sim, sveltos, Some("fleet"), "west").await);
        let secret_west = labels(&object(&f.sim, secret, Some("argocd"), "west").await);
        (!east.contains_key(PROD)
            && west.get(PROD).is_some_and(|v| v == "selected")
            && secret_west.contains_key(PROD))
        .then_some(east)
    })
    .await
    .expect("the membership label moves from east to west");
    assert_eq!(moved[HEALTHY], "false");
    assert_eq!(moved["team"], "payments", "kubectl's label is untouched");
    settled(&f, &cluster("east"), MirrorState::Written).await;
    settled(&f, &cluster("west"), MirrorState::Written).await;
    let writes = (
        patches(&f.sim, "sveltosclusters"),
        patches(&f.sim, "secrets"),
    );
    println!("mirror writes: start {writes_at_start:?}, after one failover {writes:?}");
    assert_eq!(
        writes,
        (4, 4),
        "one apply per object per transition, none for the repeat"
    );
}

#[tokio::test]
async fn an_unhealthy_cluster_taints_karmada_and_ocm_and_recovery_removes_only_that_taint() {
    let f = fixture(Duration::from_secs(3600)).await;
    let theirs = json!({"key": "cluster.karmada.io/not-ready", "effect": "NoSchedule"});
    create(
        &f.sim,
        MirrorKind::KarmadaCluster,
        None,
        "east",
        json!({"spec": {"taints": [theirs]}}),
    )
    .await;
    create(
        &f.sim,
        MirrorKind::OcmManagedCluster,
        None,
        "east",
        json!({"spec": {"hubAcceptsClient": true}}),
    )
    .await;
    let mut karmada = mirror(MirrorKind::KarmadaCluster, "east", None);
    karmada.taint_effect = Some(MirrorTaintEffect::NoExecute);
    let mirrors = [karmada, mirror(MirrorKind::OcmManagedCluster, "east", None)];
    f.handle
        .observe(cluster("east"), &mirrors, &[], &input(true, false, &[]));
    settled(&f, &cluster("east"), MirrorState::Written).await;
    let k = object(&f.sim, MirrorKind::KarmadaCluster, None, "east").await;
    assert_eq!(
        taint_keys(&k),
        [
            "cluster.karmada.io/not-ready=NoSchedule",
            "health.fleetpulse.io/unhealthy=NoExecute"
        ]
    );
    assert!(k["spec"]["taints"][1]["timeAdded"].is_string());
    assert_eq!(labels(&k)["team"], "payments");
    let o = object(&f.sim, MirrorKind::OcmManagedCluster, None, "east").await;
    assert_eq!(taint_keys(&o), ["health.fleetpulse.io/unhealthy=NoSelect"]);
    assert_eq!(
        o["spec"]["hubAcceptsClient"], true,
        "the rest of the spec is kept"
    );

    f.handle
        .observe(cluster("east"), &mirrors, &[], &input(true, true, &[]));
    let recovered = eventually(WAIT, || async {
        let k = object(&f.sim, MirrorKind::KarmadaCluster, None, "east").await;
        let o = object(&f.sim, MirrorKind::OcmManagedCluster, None, "east").await;
        (taint_keys(&o).is_empty() && taint_keys(&k).len() == 1).then_some(k)
    })
    .await
    .expect("the fleetpulse taint is removed on recovery");
    assert_eq!(
        taint_keys(&recovered),
        ["cluster.karmada.io/not-ready=NoSchedule"]
    );
    assert_eq!(labels(&recovered)[HEALTHY], "true");
    settled(&f, &cluster("east"), MirrorState::Written).await;
    let writes = (
        patches(&f.sim, "clusters"),
        patches(&f.sim, "managedclusters"),
    );
    println!("mirror writes (labels + taint per transition): {writes:?}");
    assert_eq!(writes, (4, 4));
}

#[tokio::test]
async fn a_write_that_races_another_writer_is_retried_and_keeps_both_changes() {
    let f = fixture(Duration::from_secs(3600)).await;
    create(
        &f.sim,
        MirrorKind::OcmManagedCluster,
        None,
        "east",
        json!({}),
    )
    .await;
    let other = json!({"key": "example.com/maintenance", "effect": "NoSelect"});
    // Another controller adds its taint between fleetpulse's read and its write.
    f.sim.interleave_before_next(
        "managedclusters",
        "patch",
        json!({"spec": {"taints": [other]}}),
    );
    let mirrors = [mirror(MirrorKind::OcmManagedCluster, "east", None)];
    f.handle
        .observe(cluster("east"), &mirrors, &[], &input(false, false, &[]));
    settled(&f, &cluster("east"), MirrorState::Written).await;
    let o = object(&f.sim, MirrorKind::OcmManagedCluster, None, "east").await;
    assert_eq!(
        taint_keys(&o),
        [
            "example.com/maintenance=NoSelect",
            "health.fleetpulse.io/unhealthy=NoSelect"
        ]
    );
    // The conflicted apply, then the apply and the taint write after a fresh read.
    assert_eq!(patches(&f.sim, "managedclusters"), 3);
}

#[tokio::test]
async fn a_missing_mirror_is_reported_then_written_once_it_exists() {
    let mut f = fixture(Duration::from_secs(5)).await;
    let mirrors = [mirror(MirrorKind::SveltosCluster, "late", None)];
    f.handle
        .observe(cluster("late"), &mirrors, &[], &input(true, true, &[PROD]));
    let change = next_change(&mut f).await;
    assert_eq!(
        (change.condition.status, change.condition.reason.as_str()),
        ("False", "MirrorNotFound")
    );
    assert!(
        change.condition.message.contains(
            "SveltosCluster lib.projectsveltos.io/v1beta1 fleet/late does not exist; create it"
        ),
        "{}",
        change.condition.message
    );
    assert_eq!(patches(&f.sim, "sveltosclusters"), 0);
    create(
        &f.sim,
        MirrorKind::SveltosCluster,
        Some("fleet"),
        "late",
        json!({}),
    )
    .await;
    let change = next_change(&mut f).await;
    assert_eq!(
        (change.condition.status, change.condition.reason.as_str()),
        ("True", "Mirrored")
    );
    assert_eq!(
        labels(&object(&f.sim, MirrorKind::SveltosCluster, Some("fleet"), "late").await)[PROD],
        "selected"
    );
    assert_eq!(patches(&f.sim, "sveltosclusters"), 1);

    // Someone removes fleetpulse's labels: the next resync puts them back, once.
    let strip = json!({"metadata": {"labels": {PROD: null, HEALTHY: null}}});
    api(&f.sim, MirrorKind::SveltosCluster, Some("fleet"))
        .patch("late", &PatchParams::default(), &Patch::Merge(strip))
        .await
        .unwrap();
    let restored = eventually(WAIT, || async {
        let l = labels(&object(&f.sim, MirrorKind::SveltosCluster, Some("fleet"), "late").await);
        l.contains_key(PROD).then_some(l)
    })
    .await
    .expect("the resync restores the labels");
    assert_eq!(restored[HEALTHY], "true");
    assert_eq!(
        patches(&f.sim, "sveltosclusters"),
        3,
        "the strip and one restoring apply"
    );
}

#[tokio::test]
async fn an_unknown_kind_is_a_condition_without_any_request() {
    let mut f = fixture(Duration::from_secs(3600)).await;
    let widget = MirrorRef::new("example.io/v1", "Widget", "east");
    f.handle
        .observe(cluster("east"), &[widget], &[], &input(true, true, &[]));
    let change = next_change(&mut f).await;
    assert_eq!(
        (change.condition.status, change.condition.reason.as_str()),
        ("False", "UnknownKind")
    );
    assert!(
        change
            .condition
            .message
            .contains("use one of SveltosCluster"),
        "{}",
        change.condition.message
    );
    assert!(f.sim.requests().iter().all(|r| r.group != "example.io"));
}

#[tokio::test]
async fn while_frozen_nothing_is_written_and_the_release_writes_what_changed() {
    let f = fixture(Duration::from_secs(3600)).await;
    create(
        &f.sim,
        MirrorKind::KubeFleetMemberCluster,
        None,
        "east",
        json!({}),
    )
    .await;
    let mirrors = [mirror(MirrorKind::KubeFleetMemberCluster, "east", None)];
    f.handle
        .observe(cluster("east"), &mirrors, &[], &input(true, true, &[PROD]));
    settled(&f, &cluster("east"), MirrorState::Written).await;
    let before = f.sim.total_writes();
    f.handle.freeze(true);
    f.handle
        .observe(cluster("east"), &mirrors, &[], &input(false, false, &[]));
    let held = eventually(WAIT, || async {
        let s = f.handle.status(&cluster("east"));
        (s[0].reason == "Frozen").then_some(s)
    })
    .await
    .expect("the status says the brake holds the write");
    assert_eq!(held[0].labels[HEALTHY], "false");
    assert_eq!(f.sim.total_writes(), before, "frozen: zero writes");
    f.handle.freeze(false);
    settled(&f, &cluster("east"), MirrorState::Written).await;
    let o = object(&f.sim, MirrorKind::KubeFleetMemberCluster, None, "east").await;
    assert_eq!(
        taint_keys(&o),
        ["health.fleetpulse.io/unhealthy=NoSchedule"]
    );
    assert!(o["spec"]["taints"][0].get("timeAdded").is_none());
    println!(
        "writes while frozen: 0; on release: {}",
        f.sim.total_writes() - before
    );
    assert_eq!(f.sim.total_writes() - before, 2);
}

#[tokio::test]
async fn the_brake_shows_on_a_write_already_waiting_without_another_observe() {
    // A missing object: its write fails and waits in backoff, so nothing but the brake
    // itself can change what its status shows.
    let mut f = fixture(Duration::from_secs(3600)).await;
    let mirrors = [mirror(MirrorKind::SveltosCluster, "gone", None)];
    f.handle
        .observe(cluster("gone"), &mirrors, &[], &input(true, true, &[PROD]));
    assert_eq!(next_change(&mut f).await.condition.reason, "MirrorNotFound");
    let reason = |f: &Fixture| f.handle.status(&cluster("gone"))[0].reason.clone();
    f.handle.freeze(true);
    let frozen = eventually(WAIT, || async { (reason(&f) == "Frozen").then_some(()) }).await;
    assert!(frozen.is_some(), "still {}", reason(&f));
    f.handle.freeze(false);
    let released = eventually(WAIT, || async {
        (reason(&f) == "MirrorNotFound").then_some(())
    })
    .await;
    assert!(released.is_some(), "still {}", reason(&f));
}

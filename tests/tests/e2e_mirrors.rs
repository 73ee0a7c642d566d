//! Mirrors end to end: the real `fleetpulse-hub serve --kube` against a simulated
//! management cluster that also holds other tools' objects (SveltosClusters, Argo CD
//! cluster Secrets, Karmada Clusters, OCM ManagedClusters, from the test CRDs in
//! `fixtures/mirror-crds/`), and one real agent per simulated member cluster; and an
//! embedded hub writing to the cluster `--mirror-kubeconfig` names; and a hub restarted
//! while cut off from every agent, which must not mark their mirrors unhealthy. Each scenario prints
//! and bounds the hub's writes to mirror objects: O(transitions), none while steady.
//!
//! Timing: 1 s heartbeats, 4 s grace. Deadlines are generous; nothing sleeps a fixed time.

use std::time::Duration;

use fleetpulse_common::api::condition::{MIRRORED, REACHABLE, Status};
use fleetpulse_hub::mirrors::MirrorKind;
use fleetpulse_tests::kube_fleet::{CLUSTER_SET, FleetSpec, KubeFleet, NAMESPACE, objects};
use fleetpulse_tests::mirror_objects::{create, install_crds, labels, object, taint_keys};
use fleetpulse_tests::wait::until_some;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(45);
/// The ClusterSet's membership label, as on MemberClusters and their mirrors.
const MEMBER: &str = "clusterset.fleetpulse.io/primary";
const HEALTHY: &str = "health.fleetpulse.io/healthy";
const REACHABLE_LABEL: &str = "health.fleetpulse.io/reachable";
const ARGOCD: &str = "argocd";
const SECRET_TYPE: &str = "argocd.argoproj.io/secret-type";
/// Another writer's taint, on every taint-scheduled mirror.
const MAINTENANCE: &str = "example.com/maintenance=NoSchedule";

/// The hub flags of a run: the given `--mirror-default`s, a short resync, and the status
/// refresh off (transitions only).
fn spec(members: usize, defaults: &[&str]) -> FleetSpec {
    let mut hub_args: Vec<String> = ["--status-refresh-seconds", "0"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    for d in defaults {
        hub_args.extend(["--mirror-default".to_owned(), (*d).to_owned()]);
    }
    hub_args.extend(["--mirror-resync-seconds".to_owned(), "5".to_owned()]);
    FleetSpec {
        members,
        hub_args,
        ..FleetSpec::default()
    }
}

/// Prepares the fleet, installs the mirror CRDs, an `argocd` namespace and, for each
/// member and each of `kinds`, its mirror object (another writer's label on every one, its
/// taint on the taint-scheduled ones), except those named in `missing`; then starts it.
async fn launch(
    spec: FleetSpec,
    kinds: &[MirrorKind],
    missing: &[&str],
) -> anyhow::Result<KubeFleet> {
    let mut fleet = KubeFleet::prepare(spec).await?;
    let client = fleet.mgmt.client();
    install_crds(&client).await?;
    objects::namespace(&client, ARGOCD).await?;
    for m in &fleet.members {
        if missing.contains(&m.name.as_str()) {
            continue;
        }
        for &kind in kinds {
            create_mirror(&fleet, kind, &m.name).await;
        }
    }
    fleet.start().await?;
    Ok(fleet)
}

/// Where a kind's objects live in these runs.
fn namespace(kind: MirrorKind) -> Option<&'static str> {
    match kind {
        MirrorKind::ArgoCdSecret => Some(ARGOCD),
        k if k.namespaced() => Some(NAMESPACE),
        _ => None,
    }
}

async fn create_mirror(fleet: &KubeFleet, kind: MirrorKind, name: &str) {
    let extra = match kind {
        MirrorKind::ArgoCdSecret => json!({"metadata": {"labels": {(SECRET_TYPE): "cluster"}},
            "stringData": {"name": name, "server": format!("https://{name}.example.com")}}),
        k if k.taint_effect(None).is_some() => json!({"spec": {"taints": [
            {"key": "example.com/maintenance", "effect": "NoSchedule"}]}}),
        _ => json!({}),
    };
    create(&fleet.mgmt.sim, kind, namespace(kind), name, extra).await;
}

async fn mirror(fleet: &KubeFleet, kind: MirrorKind, name: &str) -> serde_json::Value {
    object(&fleet.mgmt.sim, kind, namespace(kind), name).await
}

/// The hub's patches to mirror objects of `kinds` (labels by server-side apply, taints by
/// a resourceVersion-guarded merge patch).
fn mirror_writes(fleet: &KubeFleet, kinds: &[MirrorKind]) -> u64 {
    (kinds.iter())
        .map(|k| fleet.hub_write_count(k.plural(), "patch"))
        .sum()
}

/// What an ApplicationSet's cluster generator with `selector.matchLabels` of the
/// ClusterSet's membership label would deploy to: the names of the Argo CD cluster Secrets
/// it matches.
async fn argocd_targets(fleet: &KubeFleet) -> Vec<String> {
    let secrets: Api<Secret> = Api::namespaced(fleet.mgmt.client(), ARGOCD);
    let selector = format!("{SECRET_TYPE}=cluster,{MEMBER}=selected");
    let list = secrets
        .list(&ListParams::default().labels(&selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut names: Vec<String> = list.into_iter().filter_map(|s| s.metadata.name).collect();
    names.sort();
    names
}

/// Waits until every member is Healthy and its mirrors hold what fleetpulse wants.
async fn until_mirrored(fleet: &KubeFleet) -> anyhow::Result<()> {
    fleet
        .wait_all(
            fleetpulse_common::api::condition::HEALTHY,
            Status::True,
            DEADLINE,
        )
        .await?;
    fleet.wait_all(MIRRORED, Status::True, DEADLINE).await
}

/// Waits until the Argo CD consumer sees exactly one target other than `not`; returns it.
async fn one_target(fleet: &KubeFleet, not: Option<&str>) -> anyhow::Result<String> {
    let (target, _) = until_some("the consumer to see one target", DEADLINE, || async {
        let t = argocd_targets(fleet).await;
        (t.len() == 1 && Some(t[0].as_str()) != not).then(|| t[0].clone())
    })
    .await?;
    Ok(target)
}

/// Prints the scenario's mirror writes and fails unless they are within `[min, max]`.
fn report(scenario: u32, what: &str, writes: u64, min: u64, max: u64) {
    println!("scenario={scenario} {what} mirror_writes={writes}");
    assert!(
        (min..=max).contains(&writes),
        "scenario {scenario}: {writes} mirror writes {what}, expected {min} to {max}"
    );
}

/// Fails unless no mirror object of `kinds` is written while the hub accepts `heartbeats`
/// more heartbeats.
async fn assert_mirrors_quiet(
    fleet: &KubeFleet,
    kinds: &[MirrorKind],
    heartbeats: u64,
) -> anyhow::Result<()> {
    let before = mirror_writes(fleet, kinds);
    fleet.wait_heartbeats(heartbeats, DEADLINE).await?;
    let after = mirror_writes(fleet, kinds);
    anyhow::ensure!(
        after == before,
        "mirrors written while nothing changed: {} writes",
        after - before
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_1_a_failover_moves_the_membership_label_between_sveltosclusters_and_argocd_secrets()
-> anyhow::Result<()> {
    let kinds = [MirrorKind::SveltosCluster, MirrorKind::ArgoCdSecret];
    let defaults = ["sveltoscluster", "argocd-secret:namespace=argocd"];
    let mut fleet = launch(spec(3, &defaults), &kinds, &[]).await?;
    until_mirrored(&fleet).await?;
    let first = one_target(&fleet, None).await?;
    let initial = mirror_writes(&fleet, &kinds);
    // One apply per object: reachable, healthy and (on the selected one) membership.
    report(1, "to first verdicts", initial, 6, 6);
    assert_mirrors_quiet(&fleet, &kinds, 3 * 3).await?;
    let sveltos = mirror(&fleet, MirrorKind::SveltosCluster, &first).await;
    assert_eq!(labels(&sveltos)[MEMBER], "selected");
    assert_eq!(
        labels(&sveltos)["team"],
        "payments",
        "another writer's label"
    );

    let victim = fleet.index(&first)?;
    fleet.kill_agent(victim)?;
    let moved = one_target(&fleet, Some(&first)).await?;
    println!("scenario=1 consumer target moved {first} -> {moved}");
    let ((old, new), _) = until_some("the SveltosClusters to follow", DEADLINE, || async {
        let old = labels(&mirror(&fleet, MirrorKind::SveltosCluster, &first).await);
        let new = labels(&mirror(&fleet, MirrorKind::SveltosCluster, &moved).await);
        (!old.contains_key(MEMBER) && new.contains_key(MEMBER)).then_some((old, new))
    })
    .await?;
    assert_eq!(old[REACHABLE_LABEL], "false");
    assert_eq!(old[HEALTHY], "false");
    assert_eq!(old["team"], "payments", "another writer's label stays");
    assert_eq!(new[MEMBER], "selected");
    let secret = labels(&mirror(&fleet, MirrorKind::ArgoCdSecret, &first).await);
    assert_eq!(secret[SECRET_TYPE], "cluster", "Argo CD's own label stays");
    fleet.wait_all(MIRRORED, Status::True, DEADLINE).await?;
    assert_mirrors_quiet(&fleet, &kinds, 2 * 3).await?;
    // The victim's two objects (reachable, healthy, membership) and the new member's two
    // (membership), each in one or two applies as the verdicts arrive.
    report(
        1,
        "for the failover",
        mirror_writes(&fleet, &kinds) - initial,
        4,
        8,
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_2_an_unhealthy_clusters_karmada_and_ocm_mirrors_get_the_taint_and_lose_it_on_recovery()
-> anyhow::Result<()> {
    let kinds = [MirrorKind::KarmadaCluster, MirrorKind::OcmManagedCluster];
    let defaults = [
        "karmada-cluster:taint-effect=NoExecute",
        "ocm-managedcluster",
    ];
    let mut fleet = launch(spec(3, &defaults), &kinds, &[]).await?;
    until_mirrored(&fleet).await?;
    assert_mirrors_quiet(&fleet, &kinds, 3 * 3).await?;
    let initial = mirror_writes(&fleet, &kinds);
    // One apply of the labels per object; no taint, as every member is Healthy.
    report(2, "to first verdicts", initial, 6, 6);
    for m in &fleet.members {
        for kind in kinds {
            let obj = mirror(&fleet, kind, &m.name).await;
            assert_eq!(taint_keys(&obj), [MAINTENANCE], "{kind:?} {}", m.name);
        }
    }

    let victim = 2;
    let name = fleet.members[victim].name.clone();
    fleet.kill_agent(victim)?;
    fleet
        .wait_condition(victim, REACHABLE, Status::False, DEADLINE)
        .await?;
    let tainted = [
        "example.com/maintenance=NoSchedule",
        "health.fleetpulse.io/unhealthy=NoExecute",
    ];
    let noselect = [
        "example.com/maintenance=NoSchedule",
        "health.fleetpulse.io/unhealthy=NoSelect",
    ];
    until_some("the taints", DEADLINE, || async {
        let karmada = taint_keys(&mirror(&fleet, MirrorKind::KarmadaCluster, &name).await);
        let ocm = taint_keys(&mirror(&fleet, MirrorKind::OcmManagedCluster, &name).await);
        (karmada == tainted && ocm == noselect).then_some(())
    })
    .await?;
    let ocm = mirror(&fleet, MirrorKind::OcmManagedCluster, &name).await;
    assert_eq!(labels(&ocm)[HEALTHY], "false");
    assert_eq!(
        labels(&ocm)["team"],
        "payments",
        "another writer's label stays"
    );
    let unhealthy = mirror_writes(&fleet, &kinds) - initial;
    // Each object: the labels, and the taint.
    report(2, "to taint", unhealthy, 4, 8);
    for m in fleet.members.iter().filter(|m| m.name != name) {
        let obj = mirror(&fleet, MirrorKind::KarmadaCluster, &m.name).await;
        assert_eq!(taint_keys(&obj), [MAINTENANCE], "{} is healthy", m.name);
    }

    fleet.start_agent(victim)?;
    until_some("the taints to go", DEADLINE, || async {
        let karmada = taint_keys(&mirror(&fleet, MirrorKind::KarmadaCluster, &name).await);
        let ocm = taint_keys(&mirror(&fleet, MirrorKind::OcmManagedCluster, &name).await);
        (karmada == [MAINTENANCE] && ocm == [MAINTENANCE]).then_some(())
    })
    .await?;
    let karmada = mirror(&fleet, MirrorKind::KarmadaCluster, &name).await;
    assert_eq!(labels(&karmada)[HEALTHY], "true");
    fleet.wait_all(MIRRORED, Status::True, DEADLINE).await?;
    assert_mirrors_quiet(&fleet, &kinds, 2 * 3).await?;
    report(
        2,
        "to recover",
        mirror_writes(&fleet, &kinds) - initial - unhealthy,
        4,
        8,
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_3_four_of_five_clusters_cut_off_at_once_engage_the_brake_and_no_mirror_changes()
-> anyhow::Result<()> {
    let kinds = [MirrorKind::SveltosCluster, MirrorKind::KarmadaCluster];
    let defaults = ["sveltoscluster", "karmada-cluster"];
    let fleet = launch(spec(5, &defaults), &kinds, &[]).await?;
    until_mirrored(&fleet).await?;
    assert_mirrors_quiet(&fleet, &kinds, 5 * 2).await?;
    let before = mirror_writes(&fleet, &kinds);
    report(3, "to first verdicts", before, 10, 10);
    let mut objects = Vec::new();
    for m in &fleet.members {
        for kind in kinds {
            objects.push(mirror(&fleet, kind, &m.name).await);
        }
    }
    // The hub's view of the fleet is cut: four agents stop at once (frozen, as behind a
    // partition), one keeps reporting.
    for i in 1..5 {
        fleet.pause_agent(i)?;
    }
    until_some("the partition brake", DEADLINE, || async {
        let engaged = fleet
            .hub_metric("fleetpulse_hub_partition_brake_engaged")
            .await?;
        (engaged == 1.0).then_some(())
    })
    .await?;
    for i in 1..5 {
        fleet
            .wait_condition(i, REACHABLE, Status::False, DEADLINE)
            .await?;
    }
    // The verdicts are in; the one member still reporting keeps the clock going.
    fleet.wait_heartbeats(3, DEADLINE).await?;
    let frozen = mirror_writes(&fleet, &kinds) - before;
    report(3, "while partitioned", frozen, 0, 0);
    let mut i = 0;
    for m in &fleet.members {
        for kind in kinds {
            let now = mirror(&fleet, kind, &m.name).await;
            assert_eq!(labels(&now), labels(&objects[i]), "{kind:?} {}", m.name);
            assert_eq!(
                taint_keys(&now),
                taint_keys(&objects[i]),
                "{kind:?} {}",
                m.name
            );
            i += 1;
        }
    }
    let mc = fleet.member_cluster("m2").await.unwrap_or_default();
    let mirrors = mc.status.unwrap_or_default().mirrors;
    assert!(mirrors.is_empty(), "status.mirrors is the read API's only");

    for i in 1..5 {
        fleet.resume_agent(i)?;
    }
    fleet.wait_all(REACHABLE, Status::True, DEADLINE).await?;
    until_some("the brake to release", DEADLINE, || async {
        let engaged = fleet
            .hub_metric("fleetpulse_hub_partition_brake_engaged")
            .await?;
        (engaged == 0.0).then_some(())
    })
    .await?;
    assert_mirrors_quiet(&fleet, &kinds, 5 * 3).await?;
    report(
        3,
        "through partition and return",
        mirror_writes(&fleet, &kinds) - before,
        0,
        0,
    );
    let selected = fleet.selected().await;
    assert_eq!(selected.len(), 1, "{CLUSTER_SET} still selects one");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_4_a_missing_mirror_is_reported_then_written_within_one_resync_once_created()
-> anyhow::Result<()> {
    let kinds = [MirrorKind::SveltosCluster];
    let fleet = launch(spec(2, &["sveltoscluster"]), &kinds, &["m2"]).await?;
    fleet
        .wait_condition(1, MIRRORED, Status::False, DEADLINE)
        .await?;
    let mc = fleet.member_cluster("m2").await.unwrap_or_default();
    let status = mc.status.unwrap_or_default();
    let condition = fleetpulse_common::api::condition::find(&status.conditions, MIRRORED)
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no Mirrored condition: {:?}", status.conditions))?;
    assert_eq!(condition.reason, "MirrorNotFound");
    assert!(
        condition
            .message
            .contains("SveltosCluster lib.projectsveltos.io/v1beta1 fleet/m2 does not exist"),
        "{}",
        condition.message
    );
    fleet
        .wait_event(NAMESPACE, "MemberCluster", "m2", DEADLINE, |e| {
            e.reason.as_deref() == Some("MirrorNotFound") && e.type_.as_deref() == Some("Warning")
        })
        .await?;
    fleet
        .wait_condition(0, MIRRORED, Status::True, DEADLINE)
        .await?;
    let before = mirror_writes(&fleet, &kinds);
    report(4, "before the object exists", before, 1, 1);

    create_mirror(&fleet, MirrorKind::SveltosCluster, "m2").await;
    let created = std::time::Instant::now();
    fleet
        .wait_condition(1, MIRRORED, Status::True, DEADLINE)
        .await?;
    let ms = created.elapsed().as_millis();
    println!("scenario=4 created_to_mirrored_ms={ms}");
    // The retry of a missing object waits at most one resync (5 s); the rest is slack for
    // a loaded machine.
    assert!(ms < 10_000, "within one resync (5 s): {ms} ms");
    let m2 = labels(&mirror(&fleet, MirrorKind::SveltosCluster, "m2").await);
    assert_eq!(m2[REACHABLE_LABEL], "true");
    assert_eq!(m2[HEALTHY], "true");
    fleet
        .wait_event(NAMESPACE, "MemberCluster", "m2", DEADLINE, |e| {
            e.reason.as_deref() == Some("Mirrored") && e.type_.as_deref() == Some("Normal")
        })
        .await?;
    assert_mirrors_quiet(&fleet, &kinds, 2 * 5).await?;
    report(
        4,
        "once created",
        mirror_writes(&fleet, &kinds) - before,
        1,
        1,
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_6_a_hub_restarted_behind_a_partition_marks_no_mirror_unhealthy()
-> anyhow::Result<()> {
    let kinds = [MirrorKind::SveltosCluster, MirrorKind::KarmadaCluster];
    let defaults = ["sveltoscluster", "karmada-cluster:taint-effect=NoExecute"];
    let mut fleet = launch(spec(3, &defaults), &kinds, &[]).await?;
    until_mirrored(&fleet).await?;
    assert_mirrors_quiet(&fleet, &kinds, 3 * 2).await?;
    let before = mirror_writes(&fleet, &kinds);
    let selected = fleet.selected().await;
    // The hub restarts while every agent is cut off (frozen): the new process never hears
    // them, and the partition brake, which counts the clusters it heard, cannot engage.
    anyhow::ensure!(fleet.stop_hub()?, "the hub did not exit cleanly on SIGTERM");
    for i in 0..3 {
        fleet.pause_agent(i)?;
    }
    fleet.start_hub().await?;
    for i in 0..3 {
        fleet
            .wait_condition(i, REACHABLE, Status::False, DEADLINE)
            .await?;
    }
    for m in &fleet.members {
        let karmada = mirror(&fleet, MirrorKind::KarmadaCluster, &m.name).await;
        assert_eq!(taint_keys(&karmada), [MAINTENANCE], "{}: no taint", m.name);
        assert_eq!(labels(&karmada)[HEALTHY], "true", "{}", m.name);
    }
    // The agents come back: nothing was written, and nothing is.
    for i in 0..3 {
        fleet.resume_agent(i)?;
    }
    until_mirrored(&fleet).await?;
    assert_mirrors_quiet(&fleet, &kinds, 3 * 3).await?;
    for m in &fleet.members {
        let sveltos = labels(&mirror(&fleet, MirrorKind::SveltosCluster, &m.name).await);
        assert_eq!(
            (sveltos[REACHABLE_LABEL].as_str(), sveltos[HEALTHY].as_str()),
            ("true", "true"),
            "{}",
            m.name
        );
    }
    // No health was written. If the agents' return order moved the ClusterSet (the set's
    // own rule: the first eligible cluster back replaces the held one), its membership
    // label moved: one apply on each of the two objects of the old and the new member.
    let moved = fleet.selected().await != selected;
    let expected = if moved { 4 } else { 0 };
    report(
        6,
        &format!("through a restart behind a partition (set moved: {moved})"),
        mirror_writes(&fleet, &kinds) - before,
        expected,
        expected,
    );
    Ok(())
}

/// An embedded hub (`serve --manifests --data`) writes mirrors to the cluster
/// `--mirror-kubeconfig` names, and its read API shows each mirror's state.
#[test]
fn scenario_5_an_embedded_hub_writes_mirrors_to_the_cluster_its_mirror_kubeconfig_names()
-> anyhow::Result<()> {
    use fleetpulse_common::api::MirrorState;
    use fleetpulse_tests::embedded_hub::EmbeddedHub;
    use fleetpulse_tests::wait::blocking_until;

    let dir = tempfile::tempdir()?;
    let pki = fleetpulse_tests::pki::Pki::generate(dir.path())?;
    let manifests = dir.path().join("manifests");
    let clusters = fleetpulse_tests::fleet::write_clusters(&manifests, 1, 1, 4)?;
    let cluster = &clusters[0];
    // The Argo CD cluster, served on loopback on a runtime of its own (the test blocks).
    let runtime = tokio::runtime::Runtime::new()?;
    let _in_runtime = runtime.enter();
    let argo = fleetpulse_kubesim::KubeSim::new();
    let (addr, _server) = runtime.block_on(argo.serve("127.0.0.1:0".parse()?))?;
    let kubeconfig = dir.path().join("argocd.kubeconfig");
    std::fs::write(
        &kubeconfig,
        fleetpulse_kubesim::kubeconfig(&format!("http://{addr}")),
    )?;
    runtime.block_on(async {
        objects::namespace(&argo.client(), ARGOCD).await?;
        let extra = json!({"metadata": {"labels": {(SECRET_TYPE): "cluster"}}});
        create(
            &argo,
            MirrorKind::ArgoCdSecret,
            Some(ARGOCD),
            &cluster.id.name,
            extra,
        )
        .await;
        anyhow::Ok(())
    })?;
    let kubeconfig = kubeconfig.display().to_string();
    let hub = EmbeddedHub::spawn(
        &manifests,
        &dir.path().join("data"),
        &pki,
        &[
            "--mirror-kubeconfig",
            &kubeconfig,
            "--mirror-default",
            "argocd-secret:namespace=argocd",
        ],
    )?;
    let key = dir.path().join("agent.pem");
    std::fs::write(
        &key,
        fleetpulse_common::protocol::keys::to_pem(&cluster.key),
    )?;
    let _agent = hub.agent("edge-1", &cluster.id.to_string(), &key)?;
    let secret = || {
        let obj = runtime.block_on(object(
            &argo,
            MirrorKind::ArgoCdSecret,
            Some(ARGOCD),
            &cluster.id.name,
        ));
        labels(&obj)
    };
    blocking_until("the Argo CD Secret labelled healthy", DEADLINE, || {
        secret().get(HEALTHY).is_some_and(|v| v == "true")
    })?;
    assert_eq!(secret()[REACHABLE_LABEL], "true");
    assert_eq!(secret()[SECRET_TYPE], "cluster");
    let mut shown = Vec::new();
    blocking_until("the read API to show the mirror written", DEADLINE, || {
        shown = (hub.clusters().unwrap_or_default().into_iter())
            .flat_map(|mc| mc.status.unwrap_or_default().mirrors)
            .collect();
        shown.len() == 1 && shown[0].state == MirrorState::Written
    })?;
    assert_eq!(
        shown[0].object,
        format!("Secret v1 argocd/{}", cluster.id.name)
    );
    let writes = argo.write_count("secrets", "patch");
    println!(
        "scenario=5 embedded mirror_writes={writes} shown_writes={}",
        shown[0].writes
    );
    assert_eq!(
        writes, shown[0].writes,
        "the read API counts the writes made"
    );
    assert_eq!(
        writes, 1,
        "one apply: reachable, healthy (no set selects it)"
    );
    Ok(())
}

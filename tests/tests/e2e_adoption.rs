//! Adoption and enrolment in Kubernetes mode, with the real binaries against simulated
//! clusters: a fleet listed as three SveltosClusters gets three MemberClusters from
//! `fleetpulse-hub serve --kube --adopt sveltoscluster` (labels copied, the SveltosCluster
//! as mirror, `Enrolled=False`/`AwaitingEnrolment`); each enrols with a token from
//! `fleetpulse-hub token create --kube --for` (one through `approve --kube`) and becomes
//! Reachable, and the ClusterSet selects by the copied labels. Tokens and keys live in
//! Secrets of the enrolment namespace, a token's secret never in clear, and a used token
//! is refused to a second agent without a state change. A SveltosCluster that disappears
//! leaves its MemberCluster marked `Adopted=False`/`SourceDeleted`, not deleted.

use std::time::Duration;

use fleetpulse_common::api::condition::{self, REACHABLE, Status};
use fleetpulse_hub::mirrors::MirrorKind;
use fleetpulse_tests::kube_fleet::objects::AGENT_NAMESPACE;
use fleetpulse_tests::kube_fleet::{FleetSpec, KubeFleet, NAMESPACE};
use fleetpulse_tests::mirror_objects;
use fleetpulse_tests::process::{self, Running};
use fleetpulse_tests::wait;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};

const DEADLINE: Duration = Duration::from_secs(45);

/// `(status, reason)` of condition `type_` of MemberCluster `name`, if it exists.
async fn condition_of(fleet: &KubeFleet, name: &str, type_: &str) -> Option<(Status, String)> {
    let mc = fleet.member_cluster(name).await?;
    let c = condition::find(&mc.status?.conditions, type_)?.clone();
    Some((Status::parse(&c.status), c.reason))
}

async fn wait_reason(
    fleet: &KubeFleet,
    name: &str,
    type_: &str,
    want: (Status, &str),
) -> anyhow::Result<()> {
    let what = format!("{name} {type_}={}/{}", want.0.as_str(), want.1);
    wait::until_some(&what, DEADLINE, || async {
        let got = condition_of(fleet, name, type_).await?;
        (got.0 == want.0 && got.1 == want.1).then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_adopted_sveltos_clusters_enrol_with_tokens_and_a_vanished_one_is_marked() {
    let mut spec = FleetSpec {
        adopt: true,
        ..FleetSpec::default()
    };
    spec.hub_args.extend(
        [
            "--adopt",
            "sveltoscluster",
            "--enrolment-namespace",
            AGENT_NAMESPACE,
        ]
        .map(str::to_owned),
    );
    let mut fleet = KubeFleet::prepare(spec).await.unwrap();
    fleet.start_hub().await.unwrap();

    // The hub makes a MemberCluster of each SveltosCluster, waiting for enrolment.
    for m in ["m1", "m2", "m3"] {
        wait_reason(&fleet, m, "Enrolled", (Status::False, "AwaitingEnrolment"))
            .await
            .unwrap();
        let mc = fleet.member_cluster(m).await.unwrap();
        let labels = mc.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("region").map(String::as_str), Some("eu"), "{m}");
        assert_eq!(
            labels.get("team").map(String::as_str),
            Some("payments"),
            "{m}"
        );
        assert_eq!(mc.spec.mirrors.len(), 1, "{m}");
        assert_eq!(mc.spec.mirrors[0].kind, "SveltosCluster");
        assert!(mc.spec.agent.public_keys.is_empty());
        wait_reason(&fleet, m, "Adopted", (Status::True, "Adopted"))
            .await
            .unwrap();
    }

    // Tokens from the CLI, kept as Secrets: the hash only, never the secret.
    let (t1, pin) = fleet.create_token("fleet/m1", &[]).unwrap();
    let (t2, _) = fleet.create_token("fleet/m2", &[]).unwrap();
    let (t3, _) = fleet
        .create_token("fleet/m3", &["--approval", "manual"])
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(fleet.mgmt.client(), AGENT_NAMESPACE);
    let tokens = secrets
        .list(&ListParams::default().labels("fleetpulse.io/enrolment=token"))
        .await
        .unwrap();
    assert_eq!(tokens.items.len(), 3);
    for s in &tokens.items {
        let record = &s.data.as_ref().unwrap()["record"].0;
        let record = String::from_utf8_lossy(record);
        for t in [&t1, &t2, &t3] {
            let secret = t.split_once('.').unwrap().1;
            assert!(
                !record.contains(secret),
                "a token secret is stored in clear"
            );
        }
    }

    fleet.enrol_agent(0, &t1, &pin).unwrap();
    fleet.enrol_agent(1, &t2, &pin).unwrap();
    fleet.enrol_agent(2, &t3, &pin).unwrap();
    for i in [0, 1] {
        fleet
            .wait_condition(i, REACHABLE, Status::True, DEADLINE)
            .await
            .unwrap();
    }
    wait_reason(
        &fleet,
        "m3",
        "Enrolled",
        (Status::False, "AwaitingApproval"),
    )
    .await
    .unwrap();
    assert_ne!(fleet.condition("m3", REACHABLE).await, Status::True);
    let approved = fleet.hub_cli(&["approve", "fleet/m3"]).unwrap();
    assert!(approved.contains("approved key"), "{approved}");
    fleet
        .wait_condition(2, REACHABLE, Status::True, DEADLINE)
        .await
        .unwrap();
    for m in ["m1", "m2", "m3"] {
        wait_reason(&fleet, m, "Enrolled", (Status::True, "KeyEnrolled"))
            .await
            .unwrap();
    }
    let keysets = secrets
        .list(&ListParams::default().labels("fleetpulse.io/enrolment=keyset"))
        .await
        .unwrap();
    assert_eq!(keysets.items.len(), 3);

    // The ClusterSet selects by the labels the hub copied.
    let (selected, _) = fleet
        .wait_selected(
            "the ClusterSet to select an adopted cluster",
            DEADLINE,
            |_| true,
        )
        .await
        .unwrap();
    assert!(["m1", "m2", "m3"].contains(&selected.as_str()));

    // A used token is refused to another agent with a new key, and changes nothing.
    let before = fleet.hub_cli(&["token", "list"]).unwrap();
    let key = fleet.dir.path().join("intruder.pem").display().to_string();
    let hub = fleet.hub_url().unwrap();
    let mut intruder = Running::spawn_logged(
        "fleetpulse-agent",
        "intruder",
        &[
            "run",
            "--hub",
            &hub,
            "--cluster",
            "fleet/m1",
            "--key-file",
            &key,
            "--bootstrap-token",
            &t1,
            "--hub-ca-hash",
            &pin,
            "--interval-seconds",
            "1",
        ],
    )
    .unwrap();
    wait::until("the intruder to give up", DEADLINE, || {
        intruder.exited().is_some()
    })
    .await
    .unwrap();
    assert!(!intruder.exited().unwrap().success());
    assert!(
        intruder.log_line("token_used").is_some(),
        "no token_used in its log"
    );
    assert_eq!(fleet.hub_cli(&["token", "list"]).unwrap(), before);
    assert_eq!(
        secrets
            .list(&ListParams::default().labels("fleetpulse.io/enrolment=keyset"))
            .await
            .unwrap()
            .items
            .len(),
        3
    );

    // Label changes on a SveltosCluster follow, removals included.
    let sveltos = mirror_objects::api(&fleet.mgmt.sim, MirrorKind::SveltosCluster, Some(NAMESPACE));
    let patch = serde_json::json!({"metadata": {"labels": {"team": null, "tier": "gold"}}});
    sveltos
        .patch("m1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait::until_some(
        "m1's labels to follow its SveltosCluster",
        DEADLINE,
        || async {
            let labels = fleet.member_cluster("m1").await?.metadata.labels?;
            (labels.get("tier").map(String::as_str) == Some("gold") && !labels.contains_key("team"))
                .then_some(())
        },
    )
    .await
    .unwrap();

    // A SveltosCluster that disappears marks its MemberCluster, which stays.
    sveltos
        .delete("m2", &DeleteParams::default())
        .await
        .unwrap();
    wait_reason(&fleet, "m2", "Adopted", (Status::False, "SourceDeleted"))
        .await
        .unwrap();
    assert!(fleet.member_cluster("m2").await.is_some());
    assert_eq!(fleet.condition("m2", REACHABLE).await, Status::True);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pattern_token_with_create_cluster_enrols_a_cluster_the_hub_did_not_know() {
    // The SveltosClusters exist but the hub adopts nothing: no MemberCluster at all.
    let mut spec = FleetSpec {
        adopt: true,
        members: 2,
        ..FleetSpec::default()
    };
    spec.hub_args
        .extend(["--enrolment-namespace", AGENT_NAMESPACE].map(str::to_owned));
    let mut fleet = KubeFleet::prepare(spec).await.unwrap();
    fleet.start_hub().await.unwrap();
    assert!(fleet.member_cluster("m1").await.is_none());

    // A token for any `m*` of the namespace, allowed to create the MemberCluster.
    let chain = fleet.pki.server_cert.display().to_string();
    let out = fleet
        .hub_cli(&[
            "token",
            "create",
            "--namespace",
            NAMESPACE,
            "--name-pattern",
            "m*",
            "--create-cluster",
            "--tls-cert",
            &chain,
        ])
        .unwrap();
    let (token, pin) = process::token_and_ca_hash(&out).unwrap();
    fleet.enrol_agent(1, &token, &pin).unwrap();
    fleet
        .wait_condition(1, REACHABLE, Status::True, DEADLINE)
        .await
        .unwrap();
    let mc = fleet.member_cluster("m2").await.unwrap();
    let labels = mc.metadata.labels.unwrap_or_default();
    let id = token.split_once('.').unwrap().0;
    assert_eq!(
        labels
            .get("fleetpulse.io/created-by-token")
            .map(String::as_str),
        Some(id)
    );
    wait_reason(&fleet, "m2", "Enrolled", (Status::True, "KeyEnrolled"))
        .await
        .unwrap();
    // The token is used up by that cluster (another one needs its own), and made no other.
    let tokens = fleet.hub_cli(&["token", "list"]).unwrap();
    let line = tokens.lines().find(|l| l.starts_with(id)).unwrap();
    assert!(line.ends_with("used by fleet/m2"), "{tokens}");
    assert!(fleet.member_cluster("m1").await.is_none());
}

use super::*;
use fleetpulse_common::api::condition::{self, Status};
use fleetpulse_common::api::{
    AgentPublicKey, AgentStatus, CheckKind, CheckPhase, CheckResult, MemberClusterStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

fn described() -> Described {
    let key = keys::generate();
    let public = keys::public_key_string(&key.verifying_key());
    let kid = KeyId::of(&key.verifying_key()).0;
    let mut mc = MemberCluster::new("edge-1", Default::default());
    mc.metadata.namespace = Some("fleet".into());
    mc.metadata.labels = Some([("region".to_owned(), "eu".to_owned())].into());
    mc.spec.agent.public_keys = vec![AgentPublicKey {
        public_key: public,
        revoked: false,
    }];
    let mut status = MemberClusterStatus {
        last_heartbeat_time: Some(Time(t(590))),
        agent: Some(AgentStatus {
            version: "0.1.0".into(),
            key_id: kid,
            cluster_uid: "uid-1".into(),
            incarnation: 7,
        }),
        checks: vec![CheckResult {
            name: "dns".into(),
            kind: CheckKind::Pod,
            phase: CheckPhase::Liveness,
            passing: false,
            message: "nslookup: timed out".into(),
            since: Some(Time(t(300))),
            consecutive_failures: 4,
            success_rate_percent: Some(60.0),
        }],
        ..Default::default()
    };
    condition::set(
        &mut status.conditions,
        "Healthy",
        Status::False,
        "LivenessChecksFailing",
        "dns failing",
        t(300),
    );
    mc.status = Some(status);
    let cluster_set: ClusterSet = serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet", "metadata": {"name": "primary"},
        "spec": {"maxReplicas": 1},
        "status": {"matchingClusterRefs": [{"namespace": "fleet", "name": "edge-1"}],
                   "selectedClusterRefs": [{"namespace": "fleet", "name": "edge-2"}]}
    }))
    .unwrap();
    let other: ClusterSet = serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet", "metadata": {"name": "unrelated"},
        "spec": {"maxReplicas": 1}
    }))
    .unwrap();
    Described {
        cluster: mc,
        cluster_sets: vec![cluster_set, other],
        sets: vec![],
        transitions: vec![Transition {
            condition: "Healthy".into(),
            from: Some("True".into()),
            to: "False".into(),
            reason: "LivenessChecksFailing".into(),
            message: "dns failing".into(),
            at: Time(t(300)),
        }],
    }
}

fn line_with<'a>(out: &'a str, needle: &str) -> &'a str {
    out.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{out}"))
}

#[test]
fn describe_shows_conditions_checks_keys_sets_and_transitions() {
    let d = described();
    let out = render(&d, t(600));
    assert!(out.starts_with("Name:             edge-1\n"), "{out}");
    assert!(
        line_with(&out, "Last heartbeat:").contains("10s ago"),
        "{out}"
    );
    let healthy = line_with(&out, "LivenessChecksFailing   5m0s");
    assert!(
        healthy.contains("Healthy") && healthy.contains("dns failing"),
        "{out}"
    );
    let check: Vec<&str> = line_with(&out, "nslookup").split_whitespace().collect();
    assert_eq!(
        check[..7],
        ["dns", "liveness", "pod", "False", "5m0s", "4", "60%"],
        "{out}"
    );
    let kid = d
        .cluster
        .status
        .as_ref()
        .unwrap()
        .agent
        .as_ref()
        .unwrap()
        .key_id
        .clone();
    assert!(line_with(&out, &kid).contains("accepted") && line_with(&out, &kid).ends_with("yes"));
    let set: Vec<&str> = line_with(&out, "primary").split_whitespace().collect();
    assert_eq!(set, ["ClusterSet", "primary", "yes", "no"], "{out}");
    assert!(
        !out.contains("unrelated"),
        "only sets that match or select it: {out}"
    );
    let change = line_with(&out, "True -> False");
    assert!(
        change.contains("5m0s ago") && change.contains("LivenessChecksFailing"),
        "{out}"
    );
}

#[test]
fn describe_says_none_for_empty_sections() {
    let mut d = described();
    d.transitions.clear();
    d.cluster_sets.clear();
    let out = render(&d, t(600));
    assert!(out.contains("Sets:\n  <none>\n"), "{out}");
    assert!(
        out.contains("since this hub started):\n  <none>\n"),
        "{out}"
    );
}

#[test]
fn describe_shows_each_mirror_with_its_state_labels_taint_and_writes_only_when_there_are_mirrors() {
    use fleetpulse_common::api::{MirrorState, MirrorStatus};
    let mut d = described();
    assert!(
        !render(&d, t(600)).contains("Mirrors:"),
        "no mirrors, no section"
    );
    let status = d.cluster.status.as_mut().unwrap();
    status.mirrors = vec![MirrorStatus {
        object: "Cluster cluster.karmada.io/v1alpha1 edge-1".into(),
        state: MirrorState::Written,
        reason: "Mirrored".into(),
        message: "written".into(),
        labels: [(
            "health.fleetpulse.io/healthy".to_owned(),
            "false".to_owned(),
        )]
        .into(),
        taint: Some("NoSchedule".into()),
        writes: 3,
    }];
    let out = render(&d, t(600));
    let row: Vec<&str> = line_with(&out, "karmada").split_whitespace().collect();
    assert_eq!(
        row,
        [
            "Cluster",
            "cluster.karmada.io/v1alpha1",
            "edge-1",
            "Written",
            "health.fleetpulse.io/healthy=false",
            "NoSchedule",
            "3",
            "written"
        ],
        "{out}"
    );
}

//! The simulated kubelet drives pods to the outcomes tests choose; node readiness flips are
//! visible; the write and request ledgers count what clients did.

use fleetpulse_kubesim::{KubeSim, Outcome, PodMatcher, eventually};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api,
    api::{DeleteParams, LogParams, Patch, PatchParams, PostParams},
    runtime::wait::await_condition,
};
use serde_json::json;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(10);

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
    }))
    .unwrap()
}

fn phase(p: Option<&Pod>) -> Option<String> {
    p?.status.as_ref()?.phase.clone()
}

async fn wait_phase(api: &Api<Pod>, name: &str, want: &'static str) -> Pod {
    let cond = move |p: Option<&Pod>| phase(p).as_deref() == Some(want);
    tokio::time::timeout(DEADLINE, await_condition(api.clone(), name, cond))
        .await
        .unwrap_or_else(|_| panic!("pod {name} did not reach {want} in time"))
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn pods_succeed_by_default_and_fail_with_readable_log_when_told() {
    let sim = KubeSim::new();
    sim.set_pod_outcome(
        PodMatcher::name_prefix("bad-"),
        Outcome::Fail {
            exit_code: 3,
            log: "line1\nline2\nboom\n".into(),
        },
    );
    let pods: Api<Pod> = Api::default_namespaced(sim.client());
    pods.create(&PostParams::default(), &pod("good-1"))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("bad-1"))
        .await
        .unwrap();

    let good = wait_phase(&pods, "good-1", "Succeeded").await;
    assert!(good.spec.unwrap().node_name.unwrap().starts_with("node-"));
    let bad = wait_phase(&pods, "bad-1", "Failed").await;
    let cs = &bad.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(
        cs.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        3
    );

    let tail = pods
        .logs(
            "bad-1",
            &LogParams {
                tail_lines: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(tail, "boom\n");
    let all = pods.logs("bad-1", &LogParams::default()).await.unwrap();
    assert_eq!(all, "line1\nline2\nboom\n");
}

#[tokio::test]
async fn running_pod_is_ready_and_unschedulable_pod_says_why() {
    let sim = KubeSim::new();
    sim.set_pod_outcome(PodMatcher::name_prefix("svc"), Outcome::RunForever);
    sim.set_pod_outcome(
        PodMatcher::name_prefix("stuck"),
        Outcome::NeverSchedule {
            message: "0/3 nodes are available: insufficient cpu".into(),
        },
    );
    sim.set_pod_outcome(PodMatcher::name_prefix("pull"), Outcome::ImagePullError);
    let pods: Api<Pod> = Api::default_namespaced(sim.client());
    for n in ["svc", "stuck", "pull"] {
        pods.create(&PostParams::default(), &pod(n)).await.unwrap();
    }
    let ready = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    tokio::time::timeout(DEADLINE, await_condition(pods.clone(), "svc", ready))
        .await
        .unwrap()
        .unwrap();

    let unschedulable = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable")
                })
            })
    };
    let stuck = tokio::time::timeout(
        DEADLINE,
        await_condition(pods.clone(), "stuck", unschedulable),
    )
    .await
    .unwrap()
    .unwrap()
    .unwrap();
    let msg = stuck.status.unwrap().conditions.unwrap()[0]
        .message
        .clone()
        .unwrap();
    assert!(msg.contains("insufficient cpu"), "{msg}");

    let backoff = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.container_statuses.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.state
                        .as_ref()
                        .and_then(|s| s.waiting.as_ref())
                        .and_then(|w| w.reason.as_deref())
                        == Some("ImagePullBackOff")
                })
            })
    };
    tokio::time::timeout(DEADLINE, await_condition(pods.clone(), "pull", backoff))
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn node_not_ready_is_visible_to_clients() {
    let sim = KubeSim::new();
    let nodes: Api<Node> = Api::all(sim.client());
    assert!(sim.set_node_ready("node-2", false));
    assert!(!sim.set_node_ready("node-9", false));
    let not_ready = eventually(DEADLINE, || async {
        let n = nodes.get("node-2").await.ok()?;
        let conds = n.status?.conditions?;
        conds
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "False")
            .then_some(())
    })
    .await;
    assert!(not_ready.is_some(), "node-2 never reported NotReady");
}

#[tokio::test]
async fn writes_are_counted_per_resource_and_verb_and_requests_recorded() {
    let sim = KubeSim::builder().nodes(0).build();
    let pods: Api<Pod> = Api::default_namespaced(sim.client());
    pods.create(&PostParams::default(), &pod("w"))
        .await
        .unwrap();
    let st = json!({"status": {"message": "x"}});
    pods.patch_status("w", &PatchParams::default(), &Patch::Merge(&st))
        .await
        .unwrap();
    pods.patch_status("w", &PatchParams::default(), &Patch::Merge(&st))
        .await
        .unwrap();
    pods.get("w").await.unwrap();
    pods.delete("w", &DeleteParams::default()).await.unwrap();

    assert_eq!(sim.write_count("pods", "create"), 1);
    assert_eq!(sim.write_count("pods/status", "patch"), 2);
    assert_eq!(sim.write_count("pods", "delete"), 1);
    assert_eq!(sim.total_writes(), 4, "{:?}", sim.writes());

    let reqs = sim.requests();
    let get = reqs.iter().find(|r| r.verb == "get").expect("get recorded");
    assert_eq!(
        (get.resource.as_str(), get.namespace.as_deref()),
        ("pods", Some("default"))
    );
    assert!(
        reqs.iter()
            .any(|r| r.subresource.as_deref() == Some("status") && r.verb == "patch")
    );
}

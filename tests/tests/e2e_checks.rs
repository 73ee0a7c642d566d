//! Checks end to end: the hub serves a MemberCluster's Lua liveness check to the agent,
//! whose engine evaluates it against the cluster's objects; when a node goes NotReady the
//! cluster turns unhealthy although its API server answers, and healthy again after.

use std::time::Duration;

use serde_json::{Value, json};

use fleetpulse_agent::checks::resources::{Reader, StaticReader};
use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, READY, Status};
use fleetpulse_tests::scenario::Scenario;
use fleetpulse_tests::wait;

const CLUSTER: &str = "apiVersion: fleetpulse.io/v1alpha1
kind: MemberCluster
metadata: {name: edge-1, namespace: fleet}
spec:
  heartbeat: {intervalSeconds: 1, gracePeriodSeconds: 3}
  agent:
    publicKeys:
      - publicKey: PUBLIC_KEY
  livenessChecks:
    - name: all-nodes-ready
      resourceSelectors:
        - {version: v1, kind: Node}
      condition: |
        function evaluate()
          local hs = {pass = true, message = \"every node is Ready\"}
          for _, node in ipairs(resources) do
            for _, c in ipairs(node.status.conditions) do
              if c.type == \"Ready\" and c.status ~= \"True\" then
                hs.pass = false
                hs.message = node.metadata.name .. \" is NotReady\"
              end
            end
          end
          return hs
        end
";

fn nodes(not_ready: &[&str]) -> Vec<Value> {
    ["n1", "n2", "n3"]
        .iter()
        .map(|n| {
            let status = if not_ready.contains(n) {
                "False"
            } else {
                "True"
            };
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
                   "status": {"conditions": [{"type": "Ready", "status": status}]}})
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_ready_node_makes_the_cluster_unhealthy_though_its_api_server_answers()
-> anyhow::Result<()> {
    let mut s = Scenario::start(1, 1, 3).await?;
    let public_key =
        fleetpulse_common::protocol::keys::public_key_string(&s.clusters[0].key.verifying_key());
    s.write_manifest("clusters.yaml", &CLUSTER.replace("PUBLIC_KEY", &public_key))?;
    let cluster = StaticReader::new(nodes(&[]));
    s.start_agent_with_engine(0, Reader::Static(cluster.clone()))?;
    let check_passing = |s: &Scenario, passing: bool| {
        s.member_clusters()[0]
            .status
            .as_ref()
            .and_then(|st| {
                st.checks
                    .iter()
                    .find(|c| c.name == "all-nodes-ready")
                    .cloned()
            })
            .is_some_and(|c| c.passing == passing)
    };
    wait::until(
        "the cluster Healthy with its check passing",
        Duration::from_secs(20),
        || s.condition(0, HEALTHY) == Status::True && check_passing(&s, true),
    )
    .await?;
    let checks = s.member_clusters()[0].status.clone().unwrap().checks;
    assert!(
        checks
            .iter()
            .any(|c| c.name == "apiserver-readyz" && c.passing),
        "{checks:?}"
    );

    cluster.replace(nodes(&["n2"]));
    wait::until("the cluster unhealthy", Duration::from_secs(20), || {
        s.condition(0, HEALTHY) == Status::False
    })
    .await?;
    assert_eq!(s.condition(0, REACHABLE), Status::True, "it still reports");
    assert_eq!(s.condition(0, READY), Status::True, "Ready is latched");
    let status = s.member_clusters()[0].status.clone().unwrap();
    let healthy = status
        .conditions
        .iter()
        .find(|c| c.type_ == HEALTHY)
        .unwrap();
    assert_eq!(healthy.reason, "LivenessChecksFailing");
    assert!(
        healthy.message.contains("all-nodes-ready"),
        "{}",
        healthy.message
    );
    let check = status
        .checks
        .iter()
        .find(|c| c.name == "all-nodes-ready")
        .unwrap();
    assert_eq!(check.message, "n2 is NotReady");

    cluster.replace(nodes(&[]));
    wait::until("the cluster healthy again", Duration::from_secs(20), || {
        s.condition(0, HEALTHY) == Status::True
    })
    .await?;
    s.shutdown().await
}

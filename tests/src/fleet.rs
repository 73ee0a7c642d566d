//! A fleet on disk: one MemberCluster manifest per cluster, each listing the public key of a
//! freshly generated agent key, plus helpers to read a cluster's conditions from a hub.

use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;

use fleetpulse_common::api::MemberCluster;
use fleetpulse_common::api::condition::{self, Status};
use fleetpulse_common::protocol::keys;
use fleetpulse_common::protocol::report::ClusterId;

/// One simulated managed cluster: its id on the hub and its agent's key.
#[derive(Clone, Debug)]
pub struct SimCluster {
    /// `namespace/name` on the hub.
    pub id: ClusterId,
    /// The agent's private key.
    pub key: SigningKey,
}

/// Writes `count` MemberClusters named `edge-1`.. in namespace `fleet` into
/// `dir/clusters.yaml`, with the given heartbeat timing.
pub fn write_clusters(
    dir: &Path,
    count: usize,
    interval_secs: u32,
    grace_secs: u32,
) -> anyhow::Result<Vec<SimCluster>> {
    std::fs::create_dir_all(dir)?;
    let mut yaml = String::new();
    let mut clusters = Vec::new();
    for i in 1..=count {
        let key = keys::generate();
        let name = format!("edge-{i}");
        yaml.push_str(&format!(
            "---\napiVersion: fleetpulse.io/v1alpha1\nkind: MemberCluster\nmetadata:\n  name: {name}\n  \
             namespace: fleet\n  labels:\n    region: {region}\nspec:\n  heartbeat:\n    intervalSeconds: \
             {interval_secs}\n    gracePeriodSeconds: {grace_secs}\n  agent:\n    publicKeys:\n      - publicKey: {pk}\n",
            region = if i % 2 == 0 { "eu" } else { "us" },
            pk = keys::public_key_string(&key.verifying_key()),
        ));
        clusters.push(SimCluster {
            id: ClusterId::new("fleet", name),
            key,
        });
    }
    std::fs::write(dir.join("clusters.yaml"), yaml)?;
    Ok(clusters)
}

/// The path of the manifest file [`write_clusters`] writes.
pub fn manifest_path(dir: &Path) -> PathBuf {
    dir.join("clusters.yaml")
}

/// The status of condition `type_` of cluster `id` among `clusters`.
pub fn condition_of(clusters: &[MemberCluster], id: &ClusterId, type_: &str) -> Status {
    clusters
        .iter()
        .find(|mc| {
            mc.metadata.name.as_deref() == Some(&id.name)
                && mc.metadata.namespace.as_deref() == Some(&id.namespace)
        })
        .and_then(|mc| mc.status.as_ref())
        .and_then(|s| condition::find(&s.conditions, type_))
        .map_or(Status::Unknown, |c| Status::parse(&c.status))
}

/// A HealthPolicy `all-nodes-ready` over every cluster in namespace `fleet`: all its nodes
/// must be Ready (the demo's, and a platform team's usual first policy).
pub const ALL_NODES_READY_POLICY: &str = "apiVersion: fleetpulse.io/v1alpha1
kind: HealthPolicy
metadata: {name: all-nodes-ready, namespace: fleet}
spec:
  clusterSelector: {}
  livenessChecks:
    - name: all-nodes-ready
      readyNodes: {minPercent: 100}
";

/// A ClusterSet `primary` with `maxReplicas: 1` over every cluster [`write_clusters`] writes
/// (they all carry a `region` label).
pub const PRIMARY_CLUSTER_SET: &str = "apiVersion: fleetpulse.io/v1alpha1
kind: ClusterSet
metadata:
  name: primary
spec:
  clusterSelector:
    matchExpressions:
      - {key: region, operator: Exists}
  maxReplicas: 1
";

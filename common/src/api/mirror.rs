//! `MemberCluster.spec.mirrors`: the objects on the management cluster that stand for the
//! same cluster in another tool (a SveltosCluster, a Cluster API Cluster, an Argo CD cluster
//! Secret, an OCM ManagedCluster, a Karmada Cluster, a KubeFleet MemberCluster), onto which
//! the hub projects health and set membership as labels and, where the tool schedules by
//! taints, a `health.fleetpulse.io/unhealthy` taint.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Label the hub sets on every mirror: `"true"` while the cluster's agent reports.
pub const REACHABLE_LABEL: &str = "health.fleetpulse.io/reachable";
/// Label the hub sets on every mirror: `"true"` while the cluster is Healthy.
pub const HEALTHY_LABEL: &str = "health.fleetpulse.io/healthy";
/// Key of the taint the hub puts on taint-scheduled mirrors while the cluster is not Healthy.
pub const UNHEALTHY_TAINT: &str = "health.fleetpulse.io/unhealthy";

/// One object that stands for this cluster in another tool.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.taintEffect) || self.apiVersion.startsWith('cluster.karmada.io/')",
    "message": "taintEffect applies to Karmada Clusters (cluster.karmada.io) only; remove it"
}]))]
pub struct MirrorRef {
    /// `apiVersion` of the object, e.g. `lib.projectsveltos.io/v1beta1`,
    /// `cluster.x-k8s.io/v1beta1`, `v1` (an Argo CD cluster Secret),
    /// `cluster.open-cluster-management.io/v1`, `cluster.karmada.io/v1alpha1` or
    /// `cluster.kubernetes-fleet.io/v1beta1`.
    #[schemars(length(min = 1, max = 253))]
    pub api_version: String,
    /// `kind` of the object: `SveltosCluster`, `Cluster`, `Secret`, `ManagedCluster` or
    /// `MemberCluster`, paired with its `apiVersion`.
    #[schemars(regex(pattern = r"^[A-Z][A-Za-z0-9]{0,62}$"))]
    pub kind: String,
    /// Name of the object.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Namespace of the object (default: the MemberCluster's). Ignored for cluster-scoped
    /// kinds (OCM ManagedCluster, Karmada Cluster, KubeFleet MemberCluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
    /// Karmada Cluster only: the effect of the `health.fleetpulse.io/unhealthy` taint.
    /// `NoSchedule` (default) stops new placements; `NoExecute` also evicts what runs there
    /// (when Karmada's taint-based eviction is enabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taint_effect: Option<MirrorTaintEffect>,
}

/// Karmada Cluster only: the effect of the `health.fleetpulse.io/unhealthy` taint.
/// `NoSchedule` (default) stops new placements; `NoExecute` also evicts what runs there
/// (when Karmada's taint-based eviction is enabled).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum MirrorTaintEffect {
    /// Karmada schedules nothing new onto the cluster.
    #[default]
    NoSchedule,
    /// Karmada also evicts the workloads it placed there.
    NoExecute,
}

impl MirrorTaintEffect {
    /// The effect as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }
}

/// Where one mirror object stands, as the hub's read API shows it.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MirrorState {
    /// Not written yet, or held by the partition brake.
    Pending,
    /// Holds what fleetpulse wants.
    Written,
    /// The last attempt failed; see `reason` and `message`.
    Failed,
    /// No mirror cluster is configured (an embedded hub without `--mirror-kubeconfig`):
    /// what would be written is shown, nothing is.
    NotConnected,
}

/// One mirror object of a cluster and what fleetpulse keeps on it. Shown live by the hub's
/// read API and `fleetpulse-hub get`/`describe`; not written to the API server, where the
/// `Mirrored` condition sums it up.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MirrorStatus {
    /// `kind apiVersion namespace/name`.
    pub object: String,
    /// Where it stands.
    pub state: MirrorState,
    /// Stable reason: `Mirrored`, `MirrorNotFound`, `UnknownKind`, `KindNotServed`,
    /// `Forbidden`, `Conflict`, `WriteFailed`, `DefaultNotResolved`, `NotConnected`,
    /// `Pending` or `Frozen`.
    pub reason: String,
    /// What happened and, on failure, the fix.
    pub message: String,
    /// The labels fleetpulse wants on the object.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// The effect of fleetpulse's taint wanted on the object, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taint: Option<String>,
    /// Writes made to the object since the hub started.
    #[serde(default)]
    pub writes: u64,
}

impl MirrorRef {
    /// A reference to `kind` `apiVersion` named `name` (namespace defaulted, no taint effect).
    pub fn new(api_version: &str, kind: &str, name: &str) -> Self {
        Self {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: None,
            taint_effect: None,
        }
    }

    /// `kind apiVersion namespace/name` (or `kind apiVersion name`), for messages.
    pub fn describe(&self, default_namespace: &str) -> String {
        let ns = self.namespace.as_deref().unwrap_or(default_namespace);
        format!("{} {} {ns}/{}", self.kind, self.api_version, self.name)
    }

    /// Checks the rule of the schema: `taintEffect` only on a Karmada Cluster. The error
    /// says what to change.
    pub fn validate(&self) -> Result<(), String> {
        if self.taint_effect.is_some() && self.group() != "cluster.karmada.io" {
            return Err(format!(
                "taintEffect applies to Karmada Clusters (cluster.karmada.io) only, not {} {}; remove it",
                self.kind, self.api_version
            ));
        }
        Ok(())
    }

    /// The group of `apiVersion` (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_ref_refuses_unknown_fields_and_defaults_its_namespace() {
        let parsed: MirrorRef = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "name": "east",
            "taintEffect": "NoExecute"
        }))
        .unwrap();
        assert_eq!(parsed.namespace, None);
        assert_eq!(parsed.taint_effect, Some(MirrorTaintEffect::NoExecute));
        assert_eq!(parsed.group(), "cluster.karmada.io");
        assert_eq!(
            parsed.describe("fleet"),
            "Cluster cluster.karmada.io/v1alpha1 fleet/east"
        );
        assert_eq!(MirrorRef::new("v1", "Secret", "x").group(), "");
    }
}

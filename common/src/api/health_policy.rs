//! `HealthPolicy`: checks declared once and applied to every MemberCluster its selector
//! matches, so a platform team can own health logic without write access to clusters.
//!
//! Namespaced: a policy applies only to MemberClusters in its own namespace. This keeps a
//! tenant's policy from reaching another tenant's clusters and lets RBAC scope who may
//! change health logic per namespace (see docs/architecture.md).
// kube-derive takes one `printcolumn(...)`/`derive = ...` attribute per column or trait,
// which clippy reads as duplicates.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ClusterCheck;

/// Checks applied to every MemberCluster in the namespace that `clusterSelector` matches.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "fleetpulse.io",
    version = "v1alpha1",
    kind = "HealthPolicy",
    doc = "Checks declared once and applied to every MemberCluster of this namespace that clusterSelector matches, so a platform team can own health logic without write access to MemberClusters.",
    namespaced,
    status = "HealthPolicyStatus",
    shortname = "hp",
    category = "fleetpulse",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Clusters",
        type_ = "integer",
        json_path = ".status.matchedClusters",
        description = "how many MemberClusters the policy applies to"
    ),
    printcolumn(
        name = "Accepted",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Accepted")].status"#,
        description = "False when a check was skipped for a name clash"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Accepted")].reason"#,
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct HealthPolicySpec {
    /// Which MemberClusters of this namespace the policy applies to. `{}` matches all of
    /// them (the Kubernetes convention); a missing selector matches none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<LabelSelector>,
    /// Readiness checks added to every matched cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readiness_checks: Vec<ClusterCheck>,
    /// Liveness checks added to every matched cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub liveness_checks: Vec<ClusterCheck>,
}

/// What the hub observed of a HealthPolicy.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthPolicyStatus {
    /// How many MemberClusters the policy applies to.
    #[serde(default)]
    pub matched_clusters: u32,
    /// `Accepted`: `True` (reason `Applied`) when every check of the policy reaches every
    /// matched cluster; `False` (reason `CheckNameClash`) when a check was skipped for a
    /// cluster that already has a check of that name, with the clashes in the message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

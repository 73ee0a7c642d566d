//! `ClusterSet` (cluster-scoped) and `Set` (namespaced): a group of clusters selected by
//! labels or by name, of which at most `maxReplicas` healthy ones are selected.
//!
//! Both share [`SetSpec`] and [`SetStatus`]; selection and failover are the hub's.
// kube-derive takes one `printcolumn(...)`/`derive = ...` attribute per column or trait,
// which clippy reads as duplicates.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A fleet-wide set of clusters: selects MemberClusters in every namespace.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "fleetpulse.io",
    version = "v1alpha1",
    kind = "ClusterSet",
    status = "SetStatus",
    shortname = "cset",
    category = "fleetpulse",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "Max", type_ = "integer", json_path = ".spec.maxReplicas"),
    printcolumn(
        name = "Selected",
        type_ = "string",
        json_path = ".status.selectedClusterRefs[*].name"
    ),
    printcolumn(
        name = "Satisfied",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Satisfied")].status"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSetSpec {
    /// Which clusters belong, and how many are selected.
    #[serde(flatten)]
    pub set: SetSpec,
}

/// A namespaced set of clusters: selects only MemberClusters in its own namespace.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "fleetpulse.io",
    version = "v1alpha1",
    kind = "Set",
    namespaced,
    status = "SetStatus",
    category = "fleetpulse",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "Max", type_ = "integer", json_path = ".spec.maxReplicas"),
    printcolumn(
        name = "Selected",
        type_ = "string",
        json_path = ".status.selectedClusterRefs[*].name"
    ),
    printcolumn(
        name = "Satisfied",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Satisfied")].status"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SetSpec {
    /// Clusters whose labels match belong to the set. An empty or missing selector matches
    /// nothing (as in Sveltos).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<LabelSelector>,
    /// Clusters that belong by name, in addition to the selector's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_refs: Vec<ClusterRef>,
    /// At most this many eligible (Ready and Healthy) clusters are selected.
    #[serde(default = "default_max_replicas")]
    #[schemars(range(min = 1))]
    pub max_replicas: u32,
    /// How selected clusters are replaced.
    #[serde(default)]
    pub failover: FailoverPolicy,
}

fn default_max_replicas() -> u32 {
    1
}

/// A reference to a MemberCluster (Sveltos' ObjectReference shape pastes in).
#[derive(
    Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRef {
    /// API version of the referent (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referent (informational; `MemberCluster`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Namespace of the MemberCluster (for a `Set`: its own namespace when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the MemberCluster.
    pub name: String,
}

/// How selected clusters are replaced and ordered.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailoverPolicy {
    /// Seconds a selected cluster may be ineligible before it is replaced (default 0).
    #[serde(default)]
    pub toleration_seconds: u32,
    /// Let a recovered cluster displace its replacement (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failback: bool,
    /// Label whose integer value orders candidates (higher first), then by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_label: Option<String>,
}

/// What the hub selected.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetStatus {
    /// Clusters that belong to the set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matching_cluster_refs: Vec<ClusterRef>,
    /// Clusters currently selected (at most `maxReplicas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selected_cluster_refs: Vec<ClusterRef>,
    /// `Satisfied`: enough eligible clusters are selected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// When a selected cluster was last replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failover_time: Option<Time>,
    /// Why a selected cluster was last replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failover_reason: Option<String>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

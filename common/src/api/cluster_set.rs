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
    doc = "A cluster-wide set of MemberClusters: the healthy clusters its selector matches, up to maxReplicas, kept selected while they stay healthy and replaced when they fail.",
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
    doc = "A set of MemberClusters of one namespace: the healthy clusters its selector matches, up to maxReplicas, kept selected while they stay healthy and replaced when they fail.",
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

/// Label key prefix published on MemberClusters selected by a ClusterSet.
pub const CLUSTER_SET_LABEL_PREFIX: &str = "clusterset.fleetpulse.io";
/// Label key prefix published on MemberClusters selected by a Set (same namespace).
pub const SET_LABEL_PREFIX: &str = "set.fleetpulse.io";
/// Value of a membership label.
pub const MEMBERSHIP_LABEL_VALUE: &str = "selected";

/// The membership label key for a set: `clusterset.fleetpulse.io/<name>` for a ClusterSet,
/// `set.fleetpulse.io/<name>` for a Set. A label name may hold 63 characters; a longer set
/// name becomes its first 52 characters, `-`, and the first 10 hex digits of the SHA-256 of
/// the whole name, so distinct long names stay distinct.
pub fn membership_label_key(cluster_scoped: bool, set_name: &str) -> String {
    use sha2::{Digest, Sha256};
    let prefix = if cluster_scoped {
        CLUSTER_SET_LABEL_PREFIX
    } else {
        SET_LABEL_PREFIX
    };
    let name = if set_name.len() <= 63 {
        set_name.trim_end_matches(['.', '-']).to_owned()
    } else {
        let digest = Sha256::digest(set_name.as_bytes());
        let hex: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
        let mut head: String = set_name.chars().take(52).collect();
        head = head.trim_end_matches(['.', '-']).to_owned();
        format!("{head}-{hex}")
    };
    format!("{prefix}/{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_label_keys_fit_the_label_name_limit() {
        assert_eq!(
            membership_label_key(true, "prod"),
            "clusterset.fleetpulse.io/prod"
        );
        assert_eq!(membership_label_key(false, "web"), "set.fleetpulse.io/web");
        let long_a = format!("{}a", "x".repeat(200));
        let long_b = format!("{}b", "x".repeat(200));
        let (ka, kb) = (
            membership_label_key(true, &long_a),
            membership_label_key(true, &long_b),
        );
        assert_ne!(ka, kb, "distinct long names stay distinct");
        for key in [&ka, &kb] {
            let name = key.split_once('/').unwrap().1;
            assert_eq!(name.len(), 63);
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            );
        }
    }
}

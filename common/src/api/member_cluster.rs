//! `MemberCluster`: one managed cluster, as the hub knows it.
// kube-derive takes one `printcolumn(...)`/`derive = ...` attribute per column or trait,
// which clippy reads as duplicates.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CheckKind, ClusterCheck, MirrorRef};

/// A managed cluster: how often its agent reports, which keys may sign its reports, and
/// what "ready" and "healthy" mean for it.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "fleetpulse.io",
    version = "v1alpha1",
    kind = "MemberCluster",
    doc = "A managed cluster as the fleetpulse hub knows it: how often its agent reports, which keys may sign its reports, what ready and healthy mean for it, and (in status, written by the hub) whether it is reachable, ready and healthy.",
    namespaced,
    status = "MemberClusterStatus",
    shortname = "mc",
    category = "fleetpulse",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Reachable",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Reachable")].status"#
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Healthy",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Healthy")].status"#
    ),
    printcolumn(
        name = "Since",
        type_ = "date",
        json_path = r#".status.conditions[?(@.type=="Healthy")].lastTransitionTime"#,
        description = "when Healthy last changed"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Healthy")].reason"#,
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MemberClusterSpec {
    /// How often the agent reports and how long the hub waits before calling it unreachable.
    #[serde(default)]
    pub heartbeat: HeartbeatSpec,
    /// The agent's identity.
    #[serde(default)]
    pub agent: AgentSpec,
    /// Checks that must all pass once before the cluster becomes Ready (Ready then latches).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readiness_checks: Vec<ClusterCheck>,
    /// Checks that must keep passing for the cluster to stay Healthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub liveness_checks: Vec<ClusterCheck>,
    /// Freeze the hub's judgement of this cluster: heartbeats are still verified and
    /// recorded, but its conditions do not change (e.g. during maintenance).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Objects on the management cluster that stand for this cluster in other tools
    /// (SveltosCluster, Cluster API Cluster, Argo CD cluster Secret, OCM ManagedCluster,
    /// Karmada Cluster, KubeFleet MemberCluster). The hub keeps health and set membership
    /// labels on each, and a `health.fleetpulse.io/unhealthy` taint on those scheduled by
    /// taints while this cluster is not Healthy; it touches nothing else on them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub mirrors: Vec<MirrorRef>,
}

/// Heartbeat timing.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.gracePeriodSeconds > self.intervalSeconds",
    "message": "gracePeriodSeconds must be longer than intervalSeconds (at least two intervals is usual)"
}, {
    "rule": "!has(self.detector) || !has(self.detector.minSilenceSeconds) || (self.detector.minSilenceSeconds > self.intervalSeconds && self.detector.minSilenceSeconds <= self.gracePeriodSeconds)",
    "message": "detector.minSilenceSeconds must be longer than intervalSeconds and at most gracePeriodSeconds"
}]))]
pub struct HeartbeatSpec {
    /// Seconds between heartbeats (default 10).
    #[serde(default = "default_interval")]
    #[schemars(range(min = 1, max = 3600))]
    pub interval_seconds: u32,
    /// Seconds without an accepted heartbeat after which the cluster is unreachable
    /// (default 40).
    #[serde(default = "default_grace")]
    #[schemars(range(min = 2, max = 86400))]
    pub grace_period_seconds: u32,
    /// How the hub decides that a silent cluster is unreachable (default: `Fixed`, after
    /// `gracePeriodSeconds` of silence).
    #[serde(default, skip_serializing_if = "DetectorSpec::is_default")]
    pub detector: DetectorSpec,
}

/// The failure detector for one cluster. `gracePeriodSeconds` is its ceiling either way:
/// no detector waits longer, and a hub that just started waits a full grace period.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DetectorSpec {
    /// `Fixed` (default): unreachable after `gracePeriodSeconds` without an accepted
    /// heartbeat. `PhiAccrual`: unreachable once the silence is improbable given this
    /// cluster's own recent heartbeat arrivals (phi accrual), never sooner than
    /// `minSilenceSeconds` and never later than `gracePeriodSeconds`.
    #[serde(default)]
    pub kind: DetectorKind,
    /// `PhiAccrual` only: the suspicion level at which the cluster is unreachable, 1 to 12
    /// (default 4). The silence has phi `p` when a heartbeat would still arrive after it
    /// with probability 10^-p under a normal fit of the last arrivals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 12))]
    pub phi_threshold: Option<u32>,
    /// `PhiAccrual` only: the shortest silence that makes the cluster unreachable, in
    /// seconds (default two intervals; never less than half of `gracePeriodSeconds`, so
    /// the partition brake, which counts a cluster late after half its grace period,
    /// engages before the detector acts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 86400))]
    pub min_silence_seconds: Option<u32>,
}

impl DetectorSpec {
    /// Whether this is the default (`Fixed` with nothing set), left out when serialized.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// Which failure detector judges a cluster.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DetectorKind {
    /// Unreachable after `gracePeriodSeconds` of silence.
    #[default]
    Fixed,
    /// Phi accrual over the cluster's own inter-arrival history, between
    /// `minSilenceSeconds` and `gracePeriodSeconds`.
    PhiAccrual,
}

impl HeartbeatSpec {
    /// Checks the detector settings against the timing; the error names the field and
    /// the allowed range.
    pub fn validate_detector(&self) -> Result<(), (&'static str, String)> {
        if let Some(min) = self.detector.min_silence_seconds
            && (min <= self.interval_seconds || min > self.grace_period_seconds)
        {
            return Err((
                "spec.heartbeat.detector.minSilenceSeconds",
                format!(
                    "must be longer than intervalSeconds ({}) and at most gracePeriodSeconds ({})",
                    self.interval_seconds, self.grace_period_seconds
                ),
            ));
        }
        if let Some(phi) = self.detector.phi_threshold
            && !(1..=12).contains(&phi)
        {
            return Err((
                "spec.heartbeat.detector.phiThreshold",
                "must be between 1 and 12".to_owned(),
            ));
        }
        Ok(())
    }
}

fn default_interval() -> u32 {
    10
}

fn default_grace() -> u32 {
    40
}

impl Default for HeartbeatSpec {
    fn default() -> Self {
        Self {
            interval_seconds: default_interval(),
            grace_period_seconds: default_grace(),
            detector: DetectorSpec::default(),
        }
    }
}

/// The agent's identity: the public keys that may sign this cluster's reports.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpec {
    /// Pre-shared Ed25519 public keys (print one with `fleetpulse-agent keygen`). Keep a
    /// revoked key listed with `revoked: true` so its reports are refused as revoked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub public_keys: Vec<AgentPublicKey>,
}

/// One Ed25519 public key.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.publicKey != '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo'",
    "message": "this is the RFC 8037 test vector, whose private key is published: generate a key with `fleetpulse-agent keygen`"
}]))]
pub struct AgentPublicKey {
    /// The raw 32-byte public key, base64url without padding (the JWK `x` value).
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]{43}$"))]
    pub public_key: String,
    /// Refuse reports signed with this key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revoked: bool,
}

/// What the hub observed of a MemberCluster. Written by the hub only.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberClusterStatus {
    /// `Reachable`, `Ready` and `Healthy`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Receive time of the last accepted heartbeat (on the hub's clock). In Kubernetes mode
    /// it is written on transitions and on a coarse refresh, not on every heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    /// The agent that last reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentStatus>,
    /// The latest result of every check the agent reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckResult>,
    /// Generation of the effective check configuration the hub serves to the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_generation: Option<u64>,
    /// Hash of the effective check configuration `configGeneration` stands for (hex), so a
    /// restarted hub or a new leader keeps the generation instead of making every agent
    /// fetch its configuration again. Hub-internal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Each mirror object (`spec.mirrors` and the hub-wide defaults) and what fleetpulse
    /// keeps on it. Live on the hub's read API only; on the API server the `Mirrored`
    /// condition sums it up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<super::MirrorStatus>,
}

/// The agent that last reported.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    /// Agent version.
    pub version: String,
    /// Key id (RFC 7638 thumbprint) of the key that signed the last report.
    pub key_id: String,
    /// UID of the managed cluster (its `kube-system` namespace UID).
    pub cluster_uid: String,
    /// Boot id of the agent process.
    pub incarnation: u64,
}

/// The latest result of one check, as the agent reported it.
// One type in the heartbeat report and in the status, so the two cannot drift apart.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    /// Check name.
    pub name: String,
    /// Check kind.
    pub kind: CheckKind,
    /// `readiness` or `liveness`.
    pub phase: CheckPhase,
    /// Whether the check counts as passing.
    pub passing: bool,
    /// What the check said.
    #[serde(default)]
    pub message: String,
    /// Since when `passing` has had its current value, in whole seconds (as every
    /// Kubernetes timestamp; a fraction is accepted when read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// Consecutive failed runs.
    #[serde(default)]
    pub consecutive_failures: u32,
    /// Success rate over the check's window, for pod checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_rate_percent: Option<f64>,
}

/// Whether a check gates readiness or liveness.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CheckPhase {
    /// Gates `Ready` (latched).
    Readiness,
    /// Gates `Healthy`.
    Liveness,
}

impl MemberCluster {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_detector_is_left_out_and_a_floor_outside_interval_to_grace_is_refused() {
        let spec = HeartbeatSpec::default();
        let json = serde_json::to_value(&spec).unwrap();
        assert!(json.get("detector").is_none(), "{json}");
        let parsed: HeartbeatSpec = serde_json::from_value(serde_json::json!({
            "detector": {"kind": "PhiAccrual", "phiThreshold": 8, "minSilenceSeconds": 20}
        }))
        .unwrap();
        assert_eq!(parsed.detector.kind, DetectorKind::PhiAccrual);
        assert_eq!(parsed.validate_detector(), Ok(()));
        for min in [10, 41] {
            let bad = HeartbeatSpec {
                detector: DetectorSpec {
                    min_silence_seconds: Some(min),
                    ..parsed.detector.clone()
                },
                ..parsed.clone()
            };
            let (field, problem) = bad.validate_detector().unwrap_err();
            assert_eq!(field, "spec.heartbeat.detector.minSilenceSeconds");
            assert!(
                problem.contains("at most gracePeriodSeconds (40)"),
                "{problem}"
            );
        }
    }
}

//! `ClusterCheck`: one entry of a MemberCluster's or HealthPolicy's `readinessChecks` /
//! `livenessChecks`. Sveltos-compatible: a `SveltosCluster`'s checks paste in unchanged.
//!
//! Exactly one kind is set per check: Lua over resources (`condition`, optionally with
//! `resourceSelectors`), an Argo CD health script over resources (`healthScript`), `pod`,
//! `http`, `tcp`, `readyNodes` or `readyPods`. The local API
//! server's `/readyz` is always checked and needs no entry. This module holds the types as
//! manifests and configs carry them; [`crate::checks::model`] parses each into the typed
//! check the engines run.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod http;
mod resource_selector;

pub use http::{HeaderValueSource, HttpHeader, HttpProbe, HttpScheme, REDACTED, SecretKeySelector};
pub use resource_selector::{
    CelRule, LabelFilter, LabelFilterOperation, ResourceSelector, SelectorSpec,
};

/// One health check.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "[has(self.condition), has(self.healthScript), has(self.pod), has(self.http), has(self.tcp), has(self.readyNodes), has(self.readyPods)].filter(x, x).size() == 1",
    "message": "set exactly one check kind: condition (Lua), healthScript (Argo CD), pod, http, tcp, readyNodes or readyPods"
}, {
    "rule": "!(has(self.for) && has(self.duration))",
    "message": "`for` and `duration` mean the same; set only one"
}]))]
pub struct ClusterCheck {
    /// Name of the check, unique within the cluster's effective check list. Shown in status.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,

    /// How often to run the check, in seconds. Defaults to the heartbeat interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub period_seconds: Option<u32>,
    /// How long one run may take before it counts as failed, in seconds (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<u32>,
    /// Consecutive failed runs after which the check counts as failing (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub failure_threshold: Option<u32>,
    /// Consecutive successful runs after which a failing check counts as passing (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub success_threshold: Option<u32>,
    /// How long the check must fail continuously before it counts as failing, as a duration
    /// such as `30s` or `10m`. Same as `duration`.
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub for_: Option<String>,
    /// Same as `for` (the spelling of the original proposal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub duration: Option<String>,

    /// Lua check: the resources whose objects the script sees (`resources`, `ctx`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_selectors: Vec<ResourceSelector>,
    /// Lua check: source that defines `function evaluate()`, returning a table with `pass`
    /// (or `healthy`) and `message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65536))]
    pub condition: Option<String>,
    /// Argo CD health check: a resource health script in Argo CD's convention (global
    /// `obj`; returns `hs` with `status` Healthy, Progressing, Degraded, Suspended or
    /// Missing, and `message`), run for every object `resourceSelectors` select. Passes when
    /// every object is Healthy; the message names the first that is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65536))]
    pub health_script: Option<String>,
    /// Pod check: run a pod from a template on a schedule and judge by success rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodCheck>,
    /// HTTP probe, run from inside the managed cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpProbe>,
    /// TCP probe, run from inside the managed cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpProbe>,
    /// Built-in: a minimum of Ready nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_nodes: Option<ReadyNodesCheck>,
    /// Built-in: a minimum of Ready pods matching a selector in a namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_pods: Option<ReadyPodsCheck>,
}

/// The kind of a check, as reported by agents.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CheckKind {
    /// Lua over resources.
    Lua,
    /// Pod-based check.
    Pod,
    /// HTTP probe.
    Http,
    /// TCP probe.
    Tcp,
    /// Minimum ready nodes.
    ReadyNodes,
    /// Minimum ready pods.
    ReadyPods,
    /// The local API server's `/readyz` (always on).
    ApiServer,
}

impl ClusterCheck {
    /// Whether the hub evaluates this check: a Lua check whose selectors read the hub's
    /// objects (`fromHub`), e.g. per-cluster KeptnMetric objects kept centrally.
    pub fn reads_hub(&self) -> bool {
        let lua = self.condition.is_some() || self.health_script.is_some();
        lua && self.resource_selectors.iter().any(|s| s.from_hub)
    }

    /// The kinds this check sets (valid checks set exactly one).
    pub fn kinds(&self) -> Vec<CheckKind> {
        let mut kinds = Vec::new();
        if self.condition.is_some() {
            kinds.push(CheckKind::Lua);
        }
        if self.health_script.is_some() {
            kinds.push(CheckKind::Lua);
        }
        if self.pod.is_some() {
            kinds.push(CheckKind::Pod);
        }
        if self.http.is_some() {
            kinds.push(CheckKind::Http);
        }
        if self.tcp.is_some() {
            kinds.push(CheckKind::Tcp);
        }
        if self.ready_nodes.is_some() {
            kinds.push(CheckKind::ReadyNodes);
        }
        if self.ready_pods.is_some() {
            kinds.push(CheckKind::ReadyPods);
        }
        kinds
    }
}

/// Run a pod from a template on a schedule; fail on a low success rate or a run of failures.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodCheck {
    /// The pod to run. `restartPolicy` is forced to `Never`.
    #[schemars(schema_with = "crate::api::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// Namespace the pods run in (default: the agent's checks namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Seconds between runs (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub interval_seconds: Option<u32>,
    /// Seconds a run may take, from creation to Succeeded/Failed (default 120).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub run_timeout_seconds: Option<u32>,
    /// Window over which the success rate is computed, in seconds (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub success_rate_seconds: Option<u32>,
    /// The check fails when the success rate in the window is below this (default 80).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub success_rate_threshold_percent: Option<u32>,
    /// The check fails after this many consecutive failed runs (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub consecutive_failure_threshold: Option<u32>,
}

/// A Service inside the managed cluster.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceRef {
    /// Namespace of the Service.
    pub namespace: String,
    /// Name of the Service.
    pub name: String,
    /// Port number of the Service.
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
}

/// A TCP probe: passes when a connection opens.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TcpProbe {
    /// Host to connect to. Either `host` + `port` or `service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Port for `host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    /// In-cluster Service to connect to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceRef>,
}

/// Built-in: at least this many (or this share of) nodes are Ready.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadyNodesCheck {
    /// Minimum count of Ready nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u32>,
    /// Minimum percent of nodes that are Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub min_percent: Option<u32>,
    /// Only count nodes matching this selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// Built-in: at least this many (or this share of) pods matching a selector are Ready.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadyPodsCheck {
    /// Namespace of the pods.
    pub namespace: String,
    /// Which pods count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Minimum count of Ready pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u32>,
    /// Minimum percent of matching pods that are Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub min_percent: Option<u32>,
}

//! `ResourceSelector`: which objects a Lua check sees (Sveltos' selector plus an
//! `identifier` and `fromHub`), with its label selector in either form and its per-object
//! filters (`evaluate`, `evaluateCEL`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which objects a Lua check sees. Sveltos' `ResourceSelector` plus an `identifier`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSelector {
    /// API group ("" for the core group).
    #[serde(default)]
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `Node`. A kind the cluster does not serve yields no objects, not an error.
    pub kind: String,
    /// Namespace ("" or unset: all namespaces). A template over the MemberCluster, e.g.
    /// `{{ .Cluster.metadata.name }}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Object name (unset: all). A template over the MemberCluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A label selector: either the Kubernetes string form (`app=web,tier!=db`) or a
    /// metav1.LabelSelector (`matchLabels` / `matchExpressions`), as a SveltosCluster's
    /// checks write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "string_or_label_selector")]
    pub selector: Option<SelectorSpec>,
    /// Sveltos label filters, all of which must match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub label_filters: Vec<LabelFilter>,
    /// Key under which the matched objects appear in the Lua global `ctx`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub identifier: Option<String>,
    /// Read the hub cluster instead of the managed one (e.g. KeptnMetric objects kept
    /// centrally per cluster); such checks are evaluated by the hub.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_hub: bool,
    /// Sveltos' per-object Lua filter: source defining `function evaluate()`, run for each
    /// selected object (global `obj`), returning a table with a boolean `matching`; only
    /// matching objects are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65536))]
    pub evaluate: Option<String>,
    /// Sveltos' per-object CEL filter: named rules over the variable `resource`, evaluated
    /// in order; an object is kept when any rule is true (a rule that fails on an object
    /// counts as false for it). Applied together with `evaluate` (both must keep it).
    #[serde(default, rename = "evaluateCEL", skip_serializing_if = "Vec::is_empty")]
    pub evaluate_cel: Vec<CelRule>,
}

/// A named CEL rule of a selector's `evaluateCEL`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CelRule {
    /// Name of the rule, for messages.
    pub name: String,
    /// A CEL expression over `resource` (the object) that yields a boolean.
    pub rule: String,
}

/// A label selector in either form.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum SelectorSpec {
    /// The string form, e.g. `app=web,tier!=db,env in (a,b)`.
    Text(String),
    /// A metav1.LabelSelector.
    Structured(LabelSelector),
}

impl From<&str> for SelectorSpec {
    fn from(s: &str) -> Self {
        SelectorSpec::Text(s.to_string())
    }
}

/// The schema of [`SelectorSpec`]: a string or an object (structural schemas cannot say
/// "one of two types", so the value is kept as written and checked when it is read).
fn string_or_label_selector(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
        "description": "A label selector: either the Kubernetes string form (`app=web,tier!=db`) or a metav1.LabelSelector (`matchLabels` / `matchExpressions`), as a SveltosCluster's checks write it."
    })
}

/// A Sveltos label filter.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelFilter {
    /// Label key.
    pub key: String,
    /// `Equal`, `Different`, `Has` or `DoesNotHave`.
    pub operation: LabelFilterOperation,
    /// Label value (ignored by `Has` and `DoesNotHave`).
    #[serde(default)]
    pub value: String,
}

/// A Sveltos label-filter operation.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum LabelFilterOperation {
    /// The label equals the value.
    #[default]
    Equal,
    /// The label is absent or differs from the value.
    Different,
    /// The label is present.
    Has,
    /// The label is absent.
    DoesNotHave,
}

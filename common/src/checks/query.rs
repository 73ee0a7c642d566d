//! A `ResourceSelector` resolved for one cluster: templates rendered, the label selector
//! parsed. It filters objects (as JSON) the way the API server would for a list call, and
//! skips objects being deleted. Readers use its group/version/kind/namespace to list.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::labels::{LabelQuery, SelectorError, filters_match};
use super::template::{self, TemplateError};
use crate::api::{CelRule, LabelFilter, ResourceSelector};

/// A selector could not be resolved.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QueryError {
    /// A name or namespace template failed.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The label selector string is invalid.
    #[error(transparent)]
    Selector(#[from] SelectorError),
}

/// A resolved selector.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// API group ("" = core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (`None`: all namespaces).
    pub namespace: Option<String>,
    /// Object name (`None`: all).
    pub name: Option<String>,
    /// Parsed label selector.
    pub labels: LabelQuery,
    /// Sveltos label filters.
    pub filters: Vec<LabelFilter>,
    /// Key in the Lua `ctx`.
    pub identifier: Option<String>,
    /// Read the hub's objects instead of the managed cluster's.
    pub from_hub: bool,
    /// Sveltos' per-object Lua filter.
    pub evaluate: Option<String>,
    /// Sveltos' per-object CEL filter.
    pub evaluate_cel: Vec<CelRule>,
}

impl Query {
    /// Resolves `selector` for the MemberCluster with metadata `cluster`.
    pub fn resolve(selector: &ResourceSelector, cluster: &ObjectMeta) -> Result<Self, QueryError> {
        let render = |t: &Option<String>| -> Result<Option<String>, TemplateError> {
            t.as_deref()
                .map(|t| template::render(t, cluster))
                .transpose()
                .map(|v| v.filter(|s| !s.is_empty()))
        };
        Ok(Query {
            group: selector.group.clone(),
            version: selector.version.clone(),
            kind: selector.kind.clone(),
            namespace: render(&selector.namespace)?,
            name: render(&selector.name)?,
            labels: match &selector.selector {
                Some(s) => LabelQuery::of(s)?,
                None => LabelQuery::default(),
            },
            filters: selector.label_filters.clone(),
            identifier: selector.identifier.clone(),
            from_hub: selector.from_hub,
            evaluate: selector.evaluate.clone(),
            evaluate_cel: selector.evaluate_cel.clone(),
        })
    }

    /// `apiVersion` as objects carry it: `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether the selector names one object (its `ctx` entry is then that object).
    pub fn names_one_object(&self) -> bool {
        self.name.is_some()
    }

    /// Whether `object` is selected by what an API server can filter: same apiVersion and
    /// kind, namespace and name when set, labels and filters matching, and not being
    /// deleted. (`evaluate` and `evaluateCEL` are applied by the evaluator.)
    pub fn matches(&self, object: &Value) -> bool {
        let str_at = |ptr: &str| object.pointer(ptr).and_then(Value::as_str);
        if str_at("/apiVersion") != Some(self.api_version().as_str())
            || str_at("/kind") != Some(self.kind.as_str())
        {
            return false;
        }
        if self
            .namespace
            .as_deref()
            .is_some_and(|ns| str_at("/metadata/namespace") != Some(ns))
        {
            return false;
        }
        if self
            .name
            .as_deref()
            .is_some_and(|n| str_at("/metadata/name") != Some(n))
        {
            return false;
        }
        if object
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
        {
            return false;
        }
        let labels = object
            .pointer("/metadata/labels")
            .and_then(|l| serde_json::from_value(l.clone()).ok())
            .unwrap_or_default();
        self.labels.matches(&labels) && filters_match(&self.filters, &labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster() -> ObjectMeta {
        ObjectMeta {
            name: Some("edge-1".into()),
            namespace: Some("fleet".into()),
            ..Default::default()
        }
    }

    fn metric(name: &str, deleting: bool) -> Value {
        let mut m = json!({"apiVersion": "metrics.keptn.sh/v1", "kind": "KeptnMetric",
            "metadata": {"name": name, "namespace": "keptn", "labels": {"app": "web"}}, "status": {"value": "0.01"}});
        if deleting {
            m["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        m
    }

    #[test]
    fn a_templated_name_selects_only_this_clusters_object() {
        let selector = ResourceSelector {
            group: "metrics.keptn.sh".into(),
            version: "v1".into(),
            kind: "KeptnMetric".into(),
            namespace: Some("keptn".into()),
            name: Some("{{ .Cluster.metadata.name }}-errors".into()),
            selector: Some("app=web".into()),
            identifier: Some("metric".into()),
            ..Default::default()
        };
        let q = Query::resolve(&selector, &cluster()).unwrap();
        assert!(q.names_one_object());
        assert!(q.matches(&metric("edge-1-errors", false)));
        assert!(
            !q.matches(&metric("edge-2-errors", false)),
            "another cluster's object"
        );
        assert!(!q.matches(&metric("edge-1-errors", true)), "being deleted");
    }

    #[test]
    fn core_group_and_all_namespaces() {
        let selector = ResourceSelector {
            version: "v1".into(),
            kind: "Node".into(),
            namespace: Some(String::new()),
            ..Default::default()
        };
        let q = Query::resolve(&selector, &cluster()).unwrap();
        assert_eq!(q.api_version(), "v1");
        assert_eq!(q.namespace, None);
        assert!(
            q.matches(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}))
        );
        assert!(
            !q.matches(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "n1"}}))
        );
    }
}

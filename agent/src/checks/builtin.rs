//! Built-in checks: the API server's `/readyz` (always run when the agent has a Kubernetes
//! API, as the minimal base Karmada uses), a minimum of Ready nodes, and a minimum of Ready
//! pods matching a selector. With neither `minCount` nor `minPercent`, one Ready object is
//! the minimum. The nodes and pods are read as Lua checks read theirs: from the engine's
//! watch-fed caches ([`query`] names what to watch), not listed every run.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use fleetpulse_common::api::{ReadyNodesCheck, ReadyPodsCheck};
use fleetpulse_common::checks::labels::LabelQuery;
use fleetpulse_common::checks::model::Kind;
use fleetpulse_common::checks::query::Query;
use fleetpulse_common::compact::CompactObject;
use fleetpulse_common::selector;

use super::RunOutcome;
use super::resources::ResourceReader;

/// Name of the always-on `/readyz` check in reports.
pub const APISERVER_CHECK: &str = "apiserver-readyz";

/// The API server's `/readyz`.
pub async fn apiserver_readyz(reader: &impl ResourceReader) -> RunOutcome {
    match reader.readyz().await {
        Ok(_) => RunOutcome::pass("the API server's /readyz answered ok"),
        Err(e) => RunOutcome::fail(format!("the API server is not ready: {e}")),
    }
}

/// What a built-in of kind `kind` reads (its label selector is applied to what is read,
/// so every such check of a namespace shares one watch); `None` for other kinds.
pub fn query(kind: &Kind) -> Option<Query> {
    match kind {
        Kind::ReadyNodes(_) => Some(core_query("Node", None)),
        Kind::ReadyPods(c) => Some(core_query("Pod", Some(c.namespace.clone()))),
        _ => None,
    }
}

/// Minimum Ready nodes.
pub async fn ready_nodes(reader: &impl ResourceReader, check: &ReadyNodesCheck) -> RunOutcome {
    let query = core_query("Node", None);
    match reader.list_compact(&query).await {
        Ok(nodes) => judge_ready(
            "nodes",
            &nodes,
            check.selector.as_ref(),
            check.min_count,
            check.min_percent,
        ),
        Err(e) => RunOutcome::fail(e.to_string()),
    }
}

/// Minimum Ready pods in a namespace.
pub async fn ready_pods(reader: &impl ResourceReader, check: &ReadyPodsCheck) -> RunOutcome {
    let query = core_query("Pod", Some(check.namespace.clone()));
    match reader.list_compact(&query).await {
        Ok(pods) => {
            let what = format!("pods in namespace {}", check.namespace);
            judge_ready(
                &what,
                &pods,
                check.selector.as_ref(),
                check.min_count,
                check.min_percent,
            )
        }
        Err(e) => RunOutcome::fail(e.to_string()),
    }
}

fn core_query(kind: &str, namespace: Option<String>) -> Query {
    Query {
        group: String::new(),
        version: "v1".into(),
        kind: kind.into(),
        namespace,
        name: None,
        labels: LabelQuery::default(),
        filters: Vec::new(),
        identifier: None,
        from_hub: false,
        evaluate: None,
        evaluate_cel: Vec::new(),
    }
}

/// What a minimum reads of an object: its labels and its conditions' types and statuses
/// (the rest of the text is skipped, not parsed into values).
#[derive(Debug, Default, Deserialize)]
struct Readiness {
    #[serde(default)]
    metadata: Labelled,
    #[serde(default)]
    status: Conditions,
}

#[derive(Debug, Default, Deserialize)]
struct Labelled {
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
struct Conditions {
    #[serde(default)]
    conditions: Option<Vec<Condition>>,
}

#[derive(Debug, Default, Deserialize)]
struct Condition {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    status: String,
}

impl Readiness {
    /// An object's labels and readiness; an object of another shape has neither.
    fn of(object: &CompactObject) -> Readiness {
        serde_json::from_str(object.text()).unwrap_or_default()
    }

    /// Whether its `Ready` condition is True.
    fn is_ready(&self) -> bool {
        (self.status.conditions.iter().flatten()).any(|c| c.kind == "Ready" && c.status == "True")
    }
}

/// Judges Ready objects among those matching `selector` against the minimums.
pub fn judge_ready(
    what: &str,
    objects: &[CompactObject],
    label_selector: Option<&LabelSelector>,
    min_count: Option<u32>,
    min_percent: Option<u32>,
) -> RunOutcome {
    let no_labels = BTreeMap::new();
    let selected: Vec<Readiness> = objects
        .iter()
        .map(Readiness::of)
        .filter(|o| {
            let labels = o.metadata.labels.as_ref().unwrap_or(&no_labels);
            label_selector.is_none_or(|s| selector::matches(s, labels))
        })
        .collect();
    let total = selected.len() as u32;
    let ready = selected.iter().filter(|o| o.is_ready()).count() as u32;
    let min_count = if min_count.is_none() && min_percent.is_none() {
        Some(1)
    } else {
        min_count
    };
    let mut wants = Vec::new();
    let mut ok = true;
    if let Some(min) = min_count {
        ok &= ready >= min;
        wants.push(format!("at least {min}"));
    }
    if let Some(pct) = min_percent {
        // ready / total >= pct / 100, in integers; no objects is 0% (and 100% of nothing
        // is not a healthy cluster).
        ok &= total > 0 && u64::from(ready) * 100 >= u64::from(pct) * u64::from(total);
        wants.push(format!("at least {pct}%"));
    }
    let message = format!(
        "{ready} of {total} {what} Ready (need {})",
        wants.join(" and ")
    );
    if ok {
        RunOutcome::pass(message)
    } else {
        RunOutcome::fail(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::resources::StaticReader;
    use serde_json::json;

    fn node(name: &str, ready: bool, pool: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": pool}},
               "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    #[tokio::test]
    async fn ready_nodes_by_count_and_percent() {
        let reader = StaticReader::new(vec![
            node("a", true, "x"),
            node("b", true, "x"),
            node("c", false, "y"),
            node("d", false, "x"),
        ]);
        let count = ReadyNodesCheck {
            min_count: Some(2),
            ..Default::default()
        };
        let out = ready_nodes(&reader, &count).await;
        assert!(out.passing, "{}", out.message);
        assert_eq!(out.message, "2 of 4 nodes Ready (need at least 2)");
        let pct = ReadyNodesCheck {
            min_percent: Some(75),
            ..Default::default()
        };
        assert!(!ready_nodes(&reader, &pct).await.passing);
        let pool_x = ReadyNodesCheck {
            min_percent: Some(60),
            selector: Some(LabelSelector {
                match_labels: Some([("pool".to_owned(), "x".to_owned())].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(
            ready_nodes(&reader, &pool_x).await.passing,
            "2 of 3 in pool x is 66%"
        );
    }

    #[tokio::test]
    async fn no_nodes_fail_every_minimum_and_readyz_follows_the_reader() {
        let empty = StaticReader::new(vec![]);
        assert!(
            !ready_nodes(&empty, &ReadyNodesCheck::default())
                .await
                .passing
        );
        assert!(
            !ready_nodes(
                &empty,
                &ReadyNodesCheck {
                    min_percent: Some(0),
                    ..Default::default()
                }
            )
            .await
            .passing
        );
        assert!(apiserver_readyz(&empty).await.passing);
        assert!(
            !apiserver_readyz(&StaticReader::new(vec![]).not_ready())
                .await
                .passing
        );
    }

    #[tokio::test]
    async fn ready_pods_counts_only_the_namespace_and_selector() {
        let pod = |ns: &str, app: &str, ready: bool| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("{app}-{ns}"), "namespace": ns, "labels": {"app": app}},
                   "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
        };
        let reader = StaticReader::new(vec![
            pod("web", "web", true),
            pod("web", "db", false),
            pod("other", "web", false),
        ]);
        let check = ReadyPodsCheck {
            namespace: "web".into(),
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_owned(), "web".to_owned())].into()),
                ..Default::default()
            }),
            min_percent: Some(100),
            ..Default::default()
        };
        let out = ready_pods(&reader, &check).await;
        assert!(out.passing, "{}", out.message);
    }
}

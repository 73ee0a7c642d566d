//! [`CacheKey`]: what one watch-fed cache holds. The API server filters by what the key
//! names (kind, namespace, label selector, sent as `labelSelector` on the list and the
//! watch); a query's name, `labelFilters` and objects being deleted are filtered by the
//! agent when a round reads the cache, as [`Query::matches`] does.

use std::fmt;

use fleetpulse_common::checks::labels::{LabelQuery, Requirement};
use fleetpulse_common::checks::query::Query;

/// One list-and-watch: a kind, in one namespace or all, under one label selector.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey {
    /// API group ("" = core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (`None`: all namespaces).
    pub namespace: Option<String>,
    /// The label selector in its Kubernetes string form (empty: every object).
    pub label_selector: String,
}

impl CacheKey {
    /// The cache that holds what `query` selects (and maybe more: its name and label
    /// filters are applied when it is read).
    pub fn of(query: &Query) -> Self {
        CacheKey {
            group: query.group.clone(),
            version: query.version.clone(),
            kind: query.kind.clone(),
            namespace: query.namespace.clone(),
            label_selector: selector_string(&query.labels),
        }
    }

    /// `apiVersion` as objects carry it.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl fmt::Display for CacheKey {
    /// `v1/Pod in all namespaces`, `apps/v1/Deployment in namespace web with labels app=web`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)?;
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns}")?,
            None => write!(f, " in all namespaces")?,
        }
        if !self.label_selector.is_empty() {
            write!(f, " with labels {}", self.label_selector)?;
        }
        Ok(())
    }
}

/// `labels` in the form the API server reads in `labelSelector`
/// (`app=web,tier!=db,env in (prod,staging),!legacy`).
pub fn selector_string(labels: &LabelQuery) -> String {
    let set = |values: &[String]| values.join(",");
    let parts: Vec<String> = labels
        .0
        .iter()
        .map(|r| match r {
            Requirement::Equals(k, v) => format!("{k}={v}"),
            Requirement::NotEquals(k, v) => format!("{k}!={v}"),
            Requirement::In(k, vs) => format!("{k} in ({})", set(vs)),
            Requirement::NotIn(k, vs) => format!("{k} notin ({})", set(vs)),
            Requirement::Exists(k) => k.clone(),
            Requirement::DoesNotExist(k) => format!("!{k}"),
        })
        .collect();
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_string_parses_back_to_the_same_requirements() {
        let text = "app=web,tier!=db,env in (prod,staging),track notin (canary),ready,!legacy";
        let query = LabelQuery::parse(text).unwrap();
        let written = selector_string(&query);
        assert_eq!(written, text);
        assert_eq!(LabelQuery::parse(&written).unwrap(), query);
    }

    #[test]
    fn key_describes_kind_scope_and_selector() {
        let key = CacheKey {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: Some("web".into()),
            label_selector: "app=web".into(),
        };
        assert_eq!(
            key.to_string(),
            "apps/v1/Deployment in namespace web with labels app=web"
        );
    }
}

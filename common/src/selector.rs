//! Kubernetes label-selector matching (`matchLabels` and `matchExpressions`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// True if `labels` satisfy `selector`. An empty selector (`{}`) matches everything, as in
/// Kubernetes; callers that want "empty matches nothing" (Sveltos sets) check that first.
/// An unknown operator matches nothing.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    labels_ok
        && selector.match_expressions.iter().flatten().all(|e| {
            let value = labels.get(&e.key);
            let values = e.values.as_deref().unwrap_or_default();
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

/// True if the selector has neither labels nor expressions.
pub fn is_empty(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|m| m.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn match_labels_and_expressions_all_apply() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("env", "prod")])),
            match_expressions: Some(vec![
                expr("region", "In", &["eu", "us"]),
                expr("tier", "NotIn", &["db"]),
                expr("canary", "DoesNotExist", &[]),
            ]),
        };
        assert!(matches(&sel, &labels(&[("env", "prod"), ("region", "eu")])));
        assert!(!matches(
            &sel,
            &labels(&[("env", "prod"), ("region", "ap")])
        ));
        assert!(!matches(
            &sel,
            &labels(&[("env", "prod"), ("region", "eu"), ("tier", "db")])
        ));
        assert!(!matches(
            &sel,
            &labels(&[("env", "prod"), ("region", "eu"), ("canary", "1")])
        ));
        assert!(!matches(&sel, &labels(&[("region", "eu")])));
    }

    #[test]
    fn empty_selector_matches_everything_and_unknown_operator_nothing() {
        assert!(matches(&LabelSelector::default(), &labels(&[])));
        assert!(is_empty(&LabelSelector::default()));
        let sel = LabelSelector {
            match_expressions: Some(vec![expr("a", "Like", &[])]),
            ..Default::default()
        };
        assert!(!matches(&sel, &labels(&[("a", "b")])));
    }
}

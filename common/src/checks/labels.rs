//! Label matching for resource selectors: the Kubernetes label-selector string form
//! (`app=web,tier!=db,env in (a,b),track notin (x),ready,!legacy`), the metav1.LabelSelector
//! form (`matchLabels` / `matchExpressions`), both read into one [`LabelQuery`], and Sveltos
//! label filters.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::api::{LabelFilter, LabelFilterOperation, SelectorSpec};

/// One requirement of a parsed selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value` (also matches when the key is absent).
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)` (also matches when the key is absent).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

/// A parsed label selector: every requirement must hold. Empty matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelQuery(pub Vec<Requirement>);

/// The selector string is not valid.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "label selector {selector:?}: {problem}; write e.g. app=web,tier!=db,env in (prod,staging)"
)]
pub struct SelectorError {
    /// The selector.
    pub selector: String,
    /// What is wrong.
    pub problem: String,
}

impl LabelQuery {
    /// Reads either form of a selector.
    pub fn of(selector: &SelectorSpec) -> Result<Self, SelectorError> {
        match selector {
            SelectorSpec::Text(text) => Self::parse(text),
            SelectorSpec::Structured(selector) => Self::from_label_selector(selector),
        }
    }

    /// Reads a metav1.LabelSelector: every `matchLabels` entry and every expression must
    /// hold. An unknown operator, or `In`/`NotIn` without values, is an error (it would
    /// otherwise silently select nothing).
    pub fn from_label_selector(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let err = |problem: String| SelectorError {
            selector: serde_json::to_string(selector).unwrap_or_default(),
            problem,
        };
        let mut requirements: Vec<Requirement> = selector
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| Requirement::Equals(k.clone(), v.clone()))
            .collect();
        for e in selector.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let key = e.key.clone();
            requirements.push(match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(err(format!(
                        "operator {} on key {key:?} needs at least one value",
                        e.operator
                    )));
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => {
                    return Err(err(format!(
                        "unknown operator {other:?} on key {key:?}; use In, NotIn, Exists or DoesNotExist"
                    )));
                }
            });
        }
        Ok(LabelQuery(requirements))
    }

    /// Parses the Kubernetes string form.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let err = |problem: String| SelectorError {
            selector: selector.into(),
            problem,
        };
        let mut requirements = Vec::new();
        for part in split_top_level(selector) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let req = if let Some(key) = part.strip_prefix('!') {
                Requirement::DoesNotExist(key.trim().into())
            } else if let Some((key, value)) = part.split_once("!=") {
                Requirement::NotEquals(key.trim().into(), value.trim().into())
            } else if let Some((key, value)) =
                part.split_once("==").or_else(|| part.split_once('='))
            {
                Requirement::Equals(key.trim().into(), value.trim().into())
            } else if let Some((key, values)) = split_set(part, " notin ") {
                Requirement::NotIn(key, values.map_err(err)?)
            } else if let Some((key, values)) = split_set(part, " in ") {
                Requirement::In(key, values.map_err(err)?)
            } else if part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                Requirement::Exists(part.into())
            } else {
                return Err(err(format!("cannot read {part:?}")));
            };
            requirements.push(req);
        }
        Ok(LabelQuery(requirements))
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn split_set(part: &str, op: &str) -> Option<(String, Result<Vec<String>, String>)> {
    let (key, rest) = part.split_once(op)?;
    let rest = rest.trim();
    let values = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .map(|inner| {
            inner
                .split(',')
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .collect()
        })
        .ok_or_else(|| format!("{rest:?} is not a parenthesised list"));
    Some((key.trim().to_owned(), values))
}

/// Whether `labels` pass every Sveltos label filter.
pub fn filters_match(filters: &[LabelFilter], labels: &BTreeMap<String, String>) -> bool {
    filters.iter().all(|f| match f.operation {
        LabelFilterOperation::Equal => labels.get(&f.key) == Some(&f.value),
        LabelFilterOperation::Different => labels.get(&f.key) != Some(&f.value),
        LabelFilterOperation::Has => labels.contains_key(&f.key),
        LabelFilterOperation::DoesNotHave => !labels.contains_key(&f.key),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_and_matches_every_operator() {
        let q = LabelQuery::parse(
            "app=web, tier!=db,env in (prod, staging),track notin (canary),ready,!legacy",
        )
        .unwrap();
        assert_eq!(q.0.len(), 6);
        let ok = labels(&[("app", "web"), ("env", "prod"), ("ready", "")]);
        assert!(q.matches(&ok));
        let mut bad = ok.clone();
        bad.insert("legacy".into(), "1".into());
        assert!(!q.matches(&bad));
        assert!(!q.matches(&labels(&[("app", "web"), ("env", "dev"), ("ready", "")])));
        assert!(LabelQuery::parse("").unwrap().matches(&labels(&[])));
    }

    #[test]
    fn the_label_selector_form_matches_like_the_string_form() {
        let structured: SelectorSpec = serde_json::from_value(serde_json::json!({
            "matchLabels": { "app": "web" },
            "matchExpressions": [
                { "key": "env", "operator": "In", "values": ["prod", "staging"] },
                { "key": "legacy", "operator": "DoesNotExist" }
            ]
        }))
        .unwrap();
        let text: SelectorSpec =
            serde_json::from_value(serde_json::json!("app=web,env in (prod,staging),!legacy"))
                .unwrap();
        let (a, b) = (
            LabelQuery::of(&structured).unwrap(),
            LabelQuery::of(&text).unwrap(),
        );
        for l in [
            labels(&[("app", "web"), ("env", "prod")]),
            labels(&[("app", "web"), ("env", "dev")]),
            labels(&[("app", "web"), ("env", "prod"), ("legacy", "1")]),
            labels(&[("env", "prod")]),
        ] {
            assert_eq!(a.matches(&l), b.matches(&l), "{l:?}");
        }
        assert!(a.matches(&labels(&[("app", "web"), ("env", "staging")])));
    }

    #[test]
    fn an_unknown_operator_in_a_label_selector_is_refused_with_the_fix() {
        let bad: SelectorSpec = serde_json::from_value(serde_json::json!({
            "matchExpressions": [{ "key": "env", "operator": "Equals", "values": ["a"] }]
        }))
        .unwrap();
        let e = LabelQuery::of(&bad).unwrap_err();
        assert!(
            e.to_string()
                .contains("use In, NotIn, Exists or DoesNotExist"),
            "{e}"
        );
    }

    #[test]
    fn malformed_selectors_are_refused() {
        assert!(LabelQuery::parse("env in prod").is_err());
        assert!(LabelQuery::parse("a b c").is_err());
    }

    #[test]
    fn sveltos_label_filters() {
        let f = |key: &str, operation, value: &str| LabelFilter {
            key: key.into(),
            operation,
            value: value.into(),
        };
        let l = labels(&[("env", "prod"), ("team", "a")]);
        assert!(filters_match(
            &[
                f("env", LabelFilterOperation::Equal, "prod"),
                f("x", LabelFilterOperation::DoesNotHave, "")
            ],
            &l
        ));
        assert!(!filters_match(
            &[f("team", LabelFilterOperation::Different, "a")],
            &l
        ));
        assert!(filters_match(
            &[f("team", LabelFilterOperation::Has, "")],
            &l
        ));
    }
}

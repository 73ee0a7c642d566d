//! Label and field selectors as the list and watch endpoints accept them.

use crate::error::ApiError;
use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector` (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<LabelReq>,
}

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0usize, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out.into_iter().filter(|t| !t.is_empty()).collect()
}

fn parse_set(key: &str, rest: &str) -> Result<(String, Vec<String>), ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| ApiError::bad_request(format!("invalid label selector set: {rest}")))?;
    let values = inner.split(',').map(|v| v.trim().to_owned()).collect();
    Ok((key.trim().to_owned(), values))
}

impl LabelSelector {
    /// Parses the `labelSelector` query value.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for term in split_terms(s) {
            let req = if let Some((k, v)) = term.split_once("!=") {
                LabelReq::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once("==") {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once('=') {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = term.split_once(" notin ") {
                let (k, vs) = parse_set(k, rest)?;
                LabelReq::NotIn(k, vs)
            } else if let Some((k, rest)) = term.split_once(" in ") {
                let (k, vs) = parse_set(k, rest)?;
                LabelReq::In(k, vs)
            } else if let Some(k) = term.strip_prefix('!') {
                LabelReq::NotExists(k.trim().into())
            } else if term.contains(char::is_whitespace) || term.contains('(') {
                return Err(ApiError::bad_request(format!(
                    "invalid label selector: {term}"
                )));
            } else {
                LabelReq::Exists(term.into())
            };
            reqs.push(req);
        }
        Ok(Self { reqs })
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.reqs.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed `fieldSelector`: `path=value`, `path==value`, `path!=value` terms over any dotted
/// JSON path (`metadata.name`, `metadata.namespace`, `spec.nodeName`, `status.phase`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    reqs: Vec<(String, String, bool)>,
}

impl FieldSelector {
    /// Parses the `fieldSelector` query value.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for term in split_terms(s) {
            let (k, v, eq) = if let Some((k, v)) = term.split_once("!=") {
                (k, v, false)
            } else if let Some((k, v)) = term.split_once("==") {
                (k, v, true)
            } else if let Some((k, v)) = term.split_once('=') {
                (k, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {term}"
                )));
            };
            reqs.push((k.trim().to_owned(), v.trim().to_owned(), eq));
        }
        Ok(Self { reqs })
    }

    /// Whether the object satisfies every term; a missing field compares as the empty string.
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(path, want, eq)| {
            let mut cur = obj;
            for part in path.split('.') {
                cur = &cur[part];
            }
            let have = match cur {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (have == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"app": "web", "tier": "fe"}}})
    }

    #[test]
    fn label_selector_operators_match_like_kubernetes() {
        let o = obj();
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("missing notin (x)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing,app=web", true),
            ("app=web,tier=be", false),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn field_selector_matches_name_and_namespace() {
        let o = obj();
        assert!(FieldSelector::parse("metadata.name=a").unwrap().matches(&o));
        assert!(
            !FieldSelector::parse("metadata.namespace!=ns")
                .unwrap()
                .matches(&o)
        );
        assert!(
            FieldSelector::parse("status.phase!=Running")
                .unwrap()
                .matches(&o)
        );
    }
}

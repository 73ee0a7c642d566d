//! A minimal model of the API server's delegated authentication and authorization, for
//! servers that authenticate their own callers as kube-rbac-proxy does:
//! `authentication.k8s.io/v1` TokenReview and `authorization.k8s.io/v1`
//! SubjectAccessReview, create only. A TokenReview authenticates exactly the tokens a
//! test registered ([`crate::KubeSim::add_token`]) as their user and groups; a
//! SubjectAccessReview with `nonResourceAttributes` is allowed when a rule the test added
//! ([`crate::KubeSim::allow_non_resource`]) names the user or one of its groups, the verb
//! (or `*`) and the path (exactly, or a prefix ending in `*`), as a ClusterRole with
//! `nonResourceURLs` bound to that subject would. `resourceAttributes` are never allowed
//! (no resource rules are modelled), and nothing else of RBAC is.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::resources::ResourceDef;

/// Who a registered token authenticates as.
#[derive(Debug, Clone)]
struct User {
    username: String,
    uid: String,
    groups: Vec<String>,
}

/// One allowed (subject, verb, non-resource path).
#[derive(Debug, Clone)]
struct Rule {
    subject: String,
    verb: String,
    path: String,
}

/// Registered tokens and non-resource rules.
#[derive(Debug, Default)]
pub struct Reviews {
    tokens: BTreeMap<String, User>,
    rules: Vec<Rule>,
}

impl Reviews {
    /// Registers `token` as `username` in `groups` (plus `system:authenticated`).
    pub fn add_token(&mut self, token: &str, username: &str, groups: &[&str]) {
        let mut groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        groups.push("system:authenticated".into());
        let uid = format!("kubesim-{}", self.tokens.len() + 1);
        let user = User {
            username: username.to_owned(),
            uid,
            groups,
        };
        self.tokens.insert(token.to_owned(), user);
    }

    /// Allows `subject` (a user name or a group) `verb` on the non-resource `path`.
    pub fn allow_non_resource(&mut self, subject: &str, verb: &str, path: &str) {
        self.rules.push(Rule {
            subject: subject.to_owned(),
            verb: verb.to_owned(),
            path: path.to_owned(),
        });
    }

    /// The TokenReview's answer to `body`: the review with its `status`.
    pub fn token_review(&self, body: &[u8]) -> Result<Value, ApiError> {
        let mut review: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("TokenReview body is not JSON: {e}")))?;
        let token = review["spec"]["token"].as_str().unwrap_or_default();
        let audiences = review["spec"]["audiences"].clone();
        let audiences = match audiences {
            Value::Array(a) if !a.is_empty() => Value::Array(a),
            _ => json!(["https://kubernetes.default.svc"]),
        };
        review["status"] = match self.tokens.get(token) {
            Some(user) => json!({
                "authenticated": true,
                "audiences": audiences,
                "user": {"username": user.username, "uid": user.uid, "groups": user.groups},
            }),
            None => json!({"authenticated": false, "error": "invalid bearer token"}),
        };
        Ok(finish(review, "authentication.k8s.io/v1", "TokenReview"))
    }

    /// The SubjectAccessReview's answer to `body`.
    pub fn access_review(&self, body: &[u8]) -> Result<Value, ApiError> {
        let mut review: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("SubjectAccessReview body is not JSON: {e}"))
        })?;
        let spec = &review["spec"];
        let mut subjects: Vec<&str> = spec["groups"]
            .as_array()
            .map(|g| g.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        subjects.extend(spec["user"].as_str());
        let attributes = &spec["nonResourceAttributes"];
        let (verb, path) = (attributes["verb"].as_str(), attributes["path"].as_str());
        let allowed = match (verb, path) {
            (Some(verb), Some(path)) => self.rules.iter().any(|r| {
                subjects.contains(&r.subject.as_str())
                    && (r.verb == "*" || r.verb == verb)
                    && matches(&r.path, path)
            }),
            _ => false,
        };
        review["status"] = if allowed {
            json!({"allowed": true, "reason": "allowed by a kubesim non-resource rule"})
        } else {
            json!({"allowed": false, "reason": "no kubesim rule allows it"})
        };
        Ok(finish(
            review,
            "authorization.k8s.io/v1",
            "SubjectAccessReview",
        ))
    }
}

/// Whether `rule` (exact, or a prefix ending in `*`) matches `path`.
fn matches(rule: &str, path: &str) -> bool {
    match rule.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => rule == path,
    }
}

fn finish(mut review: Value, api_version: &str, kind: &str) -> Value {
    review["apiVersion"] = json!(api_version);
    review["kind"] = json!(kind);
    if !review["metadata"].is_object() {
        review["metadata"] = json!({});
    }
    review
}

/// Which review `def` is, if it is one (they are answered, never stored).
pub fn review_kind(def: &ResourceDef) -> Option<&'static str> {
    match (def.group.as_str(), def.plural.as_str()) {
        ("authentication.k8s.io", "tokenreviews") => Some("TokenReview"),
        ("authorization.k8s.io", "subjectaccessreviews") => Some("SubjectAccessReview"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_rule_ending_in_a_star_matches_what_follows_and_an_exact_rule_only_itself() {
        assert!(matches("/v1/*", "/v1/memberclusters"));
        assert!(!matches("/v1/*", "/metrics"));
        assert!(matches("/metrics", "/metrics"));
        assert!(!matches("/metrics", "/metrics/extra"));
    }
}

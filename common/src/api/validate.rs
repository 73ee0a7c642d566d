//! Client-side validation: the rules the CRD schema states, applied where no API server
//! enforces them (the embedded hub reading manifests from a directory). Each error names
//! the field and says how to fix it.

use std::collections::HashSet;

use super::{ClusterCheck, HealthPolicySpec, MemberClusterSpec, SetSpec};
use crate::protocol::keys;

/// A spec that breaks a rule of the schema.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{field}: {problem}")]
pub struct ValidationError {
    /// JSON path of the offending field, e.g. `spec.heartbeat.gracePeriodSeconds`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub problem: String,
}

fn err(field: impl Into<String>, problem: impl Into<String>) -> ValidationError {
    ValidationError {
        field: field.into(),
        problem: problem.into(),
    }
}

impl MemberClusterSpec {
    /// Checks the rules of the MemberCluster schema.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let hb = &self.heartbeat;
        if !(1..=3600).contains(&hb.interval_seconds) {
            return Err(err(
                "spec.heartbeat.intervalSeconds",
                "must be between 1 and 3600",
            ));
        }
        if hb.grace_period_seconds <= hb.interval_seconds {
            return Err(err(
                "spec.heartbeat.gracePeriodSeconds",
                format!(
                    "must be longer than intervalSeconds ({}); at least two intervals is usual",
                    hb.interval_seconds
                ),
            ));
        }
        hb.validate_detector()
            .map_err(|(field, problem)| err(field, problem))?;
        for (i, key) in self.agent.public_keys.iter().enumerate() {
            keys::parse_public_key(&key.public_key).map_err(|e| {
                err(
                    format!("spec.agent.publicKeys[{i}].publicKey"),
                    format!("{e}; paste the value printed by `fleetpulse-agent keygen`"),
                )
            })?;
            if let Some(problem) = keys::published(&key.public_key) {
                return Err(err(
                    format!("spec.agent.publicKeys[{i}].publicKey"),
                    problem,
                ));
            }
        }
        for (i, mirror) in self.mirrors.iter().enumerate() {
            mirror
                .validate()
                .map_err(|problem| err(format!("spec.mirrors[{i}].taintEffect"), problem))?;
        }
        validate_checks(&self.readiness_checks, &self.liveness_checks)
    }
}

impl HealthPolicySpec {
    /// Checks the rules of the HealthPolicy schema.
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_checks(&self.readiness_checks, &self.liveness_checks)
    }
}

impl SetSpec {
    /// Checks the rules of the ClusterSet/Set schema.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.max_replicas < 1 {
            return Err(err("spec.maxReplicas", "must be at least 1"));
        }
        Ok(())
    }
}

fn validate_checks(
    readiness: &[ClusterCheck],
    liveness: &[ClusterCheck],
) -> Result<(), ValidationError> {
    let mut names = HashSet::new();
    let all = readiness
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.readinessChecks[{i}]"), c))
        .chain(
            liveness
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("spec.livenessChecks[{i}]"), c)),
        );
    for (path, check) in all {
        check.validate(&path)?;
        if !names.insert(check.name.as_str()) {
            return Err(err(
                format!("{path}.name"),
                format!(
                    "check name {:?} is used twice; names must be unique",
                    check.name
                ),
            ));
        }
    }
    Ok(())
}

impl ClusterCheck {
    /// Checks one check entry; `path` prefixes field names in errors.
    pub fn validate(&self, path: &str) -> Result<(), ValidationError> {
        let valid_name = !self.name.is_empty()
            && self.name.len() <= 63
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !self.name.starts_with('-')
            && !self.name.ends_with('-');
        if !valid_name {
            return Err(err(
                format!("{path}.name"),
                format!(
                    "{:?} is not a DNS label (lowercase letters, digits, '-')",
                    self.name
                ),
            ));
        }
        let kinds = self.kinds();
        if kinds.len() != 1 {
            return Err(err(
                path,
                format!(
                    "set exactly one check kind: condition (Lua), healthScript (Argo CD), pod, \
                     http, tcp, readyNodes or readyPods (found {})",
                    kinds.len()
                ),
            ));
        }
        if self.reads_hub() && self.resource_selectors.iter().any(|s| !s.from_hub) {
            return Err(err(
                format!("{path}.resourceSelectors"),
                "a check reads either the hub (fromHub: true) or the managed cluster; split it into two checks",
            ));
        }
        if self.health_script.is_some() && self.resource_selectors.is_empty() {
            return Err(err(
                format!("{path}.resourceSelectors"),
                "a healthScript check runs its script for every selected object; add resourceSelectors naming the objects (e.g. group, version and kind)",
            ));
        }
        for (i, selector) in self.resource_selectors.iter().enumerate() {
            let at = format!("{path}.resourceSelectors[{i}]");
            if let Some(spec) = &selector.selector {
                crate::checks::labels::LabelQuery::of(spec)
                    .map_err(|e| err(format!("{at}.selector"), e.to_string()))?;
            }
            for (j, rule) in selector.evaluate_cel.iter().enumerate() {
                crate::checks::cel::compile(rule)
                    .map_err(|e| err(format!("{at}.evaluateCEL[{j}].rule"), e.to_string()))?;
            }
        }
        if let Some(http) = &self.http {
            for (i, header) in http.http_headers.iter().enumerate() {
                if header.value.is_some() == header.value_from.is_some() {
                    return Err(err(
                        format!("{path}.http.httpHeaders[{i}]"),
                        format!(
                            "header {:?}: set exactly one of value and valueFrom.secretKeyRef \
                             (a Secret of the managed cluster, for credentials)",
                            header.name
                        ),
                    ));
                }
            }
        }
        if self.for_.is_some() && self.duration.is_some() {
            return Err(err(
                path,
                "`for` and `duration` mean the same; set only one",
            ));
        }
        for (field, value) in [("for", &self.for_), ("duration", &self.duration)] {
            if let Some(v) = value {
                crate::duration::parse(v).map_err(|e| err(format!("{path}.{field}"), e))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::HeartbeatSpec;

    #[test]
    fn grace_not_longer_than_interval_is_rejected_with_the_fix() {
        let spec = MemberClusterSpec {
            heartbeat: HeartbeatSpec {
                interval_seconds: 10,
                grace_period_seconds: 10,
                ..Default::default()
            },
            ..Default::default()
        };
        let e = spec.validate().unwrap_err();
        assert_eq!(e.field, "spec.heartbeat.gracePeriodSeconds");
        assert!(e.problem.contains("longer than intervalSeconds"));
    }

    #[test]
    fn check_with_two_kinds_is_rejected() {
        let check = ClusterCheck {
            name: "x".into(),
            condition: Some("function evaluate() end".into()),
            tcp: Some(Default::default()),
            ..Default::default()
        };
        let spec = MemberClusterSpec {
            liveness_checks: vec![check],
            ..Default::default()
        };
        let e = spec.validate().unwrap_err();
        assert_eq!(e.field, "spec.livenessChecks[0]");
    }

    #[test]
    fn a_bad_label_selector_or_cel_rule_names_its_field() {
        let mut check: ClusterCheck = serde_json::from_value(serde_json::json!({
            "name": "pods",
            "condition": "function evaluate() return { pass = true } end",
            "resourceSelectors": [{ "version": "v1", "kind": "Pod",
                "selector": { "matchExpressions": [{ "key": "app", "operator": "Is", "values": ["x"] }] } }]
        }))
        .unwrap();
        let e = check.validate("spec.livenessChecks[0]").unwrap_err();
        assert_eq!(
            e.field,
            "spec.livenessChecks[0].resourceSelectors[0].selector"
        );
        check.resource_selectors[0].selector = Some("app=web".into());
        check.resource_selectors[0].evaluate_cel = vec![crate::api::CelRule {
            name: "broken".into(),
            rule: "resource.status ==".into(),
        }];
        let e = check.validate("spec.livenessChecks[0]").unwrap_err();
        assert_eq!(
            e.field,
            "spec.livenessChecks[0].resourceSelectors[0].evaluateCEL[0].rule"
        );
    }

    #[test]
    fn a_header_needs_exactly_one_of_value_and_value_from() {
        let mut header = crate::api::HttpHeader::from_secret("Authorization", "probe", "token");
        let mut check = ClusterCheck {
            name: "api".into(),
            http: Some(crate::api::HttpProbe {
                url: Some("https://api.test/".into()),
                http_headers: vec![header.clone()],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(check.validate("spec.livenessChecks[0]"), Ok(()));
        header.value = Some("Bearer x".into());
        check.http.as_mut().unwrap().http_headers = vec![header.clone()];
        let e = check.validate("spec.livenessChecks[0]").unwrap_err();
        assert_eq!(e.field, "spec.livenessChecks[0].http.httpHeaders[0]");
        assert!(
            e.problem.contains("exactly one of value and valueFrom"),
            "{}",
            e.problem
        );
        header.value_from = None;
        header.value = None;
        check.http.as_mut().unwrap().http_headers = vec![header];
        assert!(check.validate("spec.livenessChecks[0]").is_err());
    }

    #[test]
    fn a_health_script_without_selectors_is_rejected() {
        let check = ClusterCheck {
            name: "certs".into(),
            health_script: Some("hs = { status = 'Healthy' } return hs".into()),
            ..Default::default()
        };
        let e = check.validate("spec.livenessChecks[0]").unwrap_err();
        assert_eq!(e.field, "spec.livenessChecks[0].resourceSelectors");
    }

    #[test]
    fn a_taint_effect_on_a_mirror_other_than_karmada_is_rejected() {
        let mut mirror = crate::api::MirrorRef::new("cluster.karmada.io/v1alpha1", "Cluster", "a");
        mirror.taint_effect = Some(crate::api::MirrorTaintEffect::NoExecute);
        let mut spec = MemberClusterSpec {
            mirrors: vec![mirror.clone()],
            ..Default::default()
        };
        assert_eq!(spec.validate(), Ok(()));
        mirror.api_version = "cluster.open-cluster-management.io/v1".into();
        spec.mirrors.push(mirror);
        let e = spec.validate().unwrap_err();
        assert_eq!(e.field, "spec.mirrors[1].taintEffect");
        assert!(e.problem.contains("remove it"), "{}", e.problem);
    }

    #[test]
    fn duplicate_check_names_across_lists_are_rejected() {
        let check = ClusterCheck {
            name: "dup".into(),
            condition: Some("function evaluate() end".into()),
            ..Default::default()
        };
        let spec = MemberClusterSpec {
            readiness_checks: vec![check.clone()],
            liveness_checks: vec![check],
            ..Default::default()
        };
        assert_eq!(
            spec.validate().unwrap_err().field,
            "spec.livenessChecks[0].name"
        );
    }

    #[test]
    fn bad_public_key_names_the_key_index() {
        let mut spec = MemberClusterSpec::default();
        spec.agent.public_keys.push(crate::api::AgentPublicKey {
            public_key: "not-a-key".into(),
            revoked: false,
        });
        assert_eq!(
            spec.validate().unwrap_err().field,
            "spec.agent.publicKeys[0].publicKey"
        );
    }

    #[test]
    fn a_published_test_vector_key_is_refused_naming_the_key_and_the_fix() {
        let mut spec = MemberClusterSpec::default();
        spec.agent.public_keys.push(crate::api::AgentPublicKey {
            public_key: keys::PUBLISHED_KEYS[0].into(),
            revoked: false,
        });
        let e = spec.validate().unwrap_err();
        assert_eq!(e.field, "spec.agent.publicKeys[0].publicKey");
        assert!(
            e.problem.contains("RFC 8037") && e.problem.contains("keygen"),
            "{}",
            e.problem
        );
    }
}

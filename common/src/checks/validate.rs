//! Client-side validation: the rules the CRD schema states, applied where no API server
//! enforces them (the embedded hub reading manifests from a directory, `eval`). A spec's
//! checks are validated by parsing them ([`Check::parse_lists`]). Each error names the
//! field and says how to fix it.

use super::model::Check;
use crate::api::{HealthPolicySpec, MemberClusterSpec, SetSpec};
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
        self.checks().map(drop)
    }

    /// Checks the rules of the MemberCluster schema, and returns its checks, parsed.
    pub fn checks(&self) -> Result<Vec<Check>, ValidationError> {
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
        Check::parse_lists(&self.readiness_checks, &self.liveness_checks)
    }
}

impl HealthPolicySpec {
    /// Checks the rules of the HealthPolicy schema.
    pub fn validate(&self) -> Result<(), ValidationError> {
        Check::parse_lists(&self.readiness_checks, &self.liveness_checks).map(drop)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ClusterCheck, HeartbeatSpec};

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
    fn a_weak_or_published_key_is_refused_naming_the_key_and_the_fix() {
        let cases = [
            // The identity point: a valid encoding of a point of small order.
            ("AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "weak"),
            (keys::PUBLISHED_KEYS[0], "RFC 8037"),
        ];
        for (public_key, why) in cases {
            let mut spec = MemberClusterSpec::default();
            spec.agent.public_keys.push(crate::api::AgentPublicKey {
                public_key: public_key.into(),
                revoked: false,
            });
            let e = spec.validate().unwrap_err();
            assert_eq!(e.field, "spec.agent.publicKeys[0].publicKey");
            assert!(
                e.problem.contains(why) && e.problem.contains("keygen"),
                "{}",
                e.problem
            );
        }
    }
}

//! The messages: the heartbeat report an agent signs, the hub's answer, the signed config
//! request and the effective config the hub serves.

use serde::{Deserialize, Serialize};

use super::limits::{
    MAX_CHECK_NAME_BYTES, MAX_CHECKS, MAX_IDENTITY_BYTES, MAX_MESSAGE_BYTES,
    MAX_REPORT_MESSAGE_BYTES, json_escaped_len,
};
pub use crate::api::CheckResult;
use crate::api::{CheckPhase, ClusterCheck};

/// The report schema version this build writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// Largest `incarnation` or `seq` a report may carry: 2^63 - 1, so that stores with signed
/// 64-bit integers (SQLite, Kubernetes JSON numbers) order positions correctly.
pub const MAX_POSITION: u64 = i64::MAX as u64;

/// A MemberCluster's namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ClusterId {
    /// Namespace of the MemberCluster on the hub.
    pub namespace: String,
    /// Name of the MemberCluster.
    pub name: String,
}

impl ClusterId {
    /// Builds an id.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// Parses `namespace/name`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(Self::new(ns, name))
            }
            _ => Err(format!(
                "{s:?} is not NAMESPACE/NAME of a MemberCluster on the hub"
            )),
        }
    }
}

impl std::fmt::Display for ClusterId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The signed heartbeat report (the JWS payload). `C` is how its check results are held:
/// parsed (the default), or as the signed text ([`RawChecks`]), for a reader that may
/// already know them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatReport<C = Vec<CheckResult>> {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The hub's identity (its `--audience`), against replay on another hub.
    pub aud: String,
    /// Which MemberCluster this report is about.
    pub cluster: ClusterId,
    /// UID of the managed cluster (its `kube-system` namespace UID, or a configured value).
    pub cluster_uid: String,
    /// Agent version.
    pub agent_version: String,
    /// Agent boot id: grows across agent restarts (milliseconds since the epoch at start,
    /// raised above the hub's last accepted one if the clock went backwards).
    pub incarnation: u64,
    /// Strictly increasing within an incarnation.
    pub seq: u64,
    /// Issued at, seconds since the epoch (freshness only; liveness uses the hub's clock).
    pub iat: i64,
    /// Expires at, seconds since the epoch.
    pub exp: i64,
    /// The heartbeat interval the agent runs at, in seconds.
    pub interval_seconds: u32,
    /// The config generation the agent has applied (0: none yet).
    pub config_generation: u64,
    /// Check results.
    #[serde(default)]
    pub checks: C,
    /// Summary of the check results.
    pub summary: Summary,
}

/// Summary of a report's checks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Every readiness check passes.
    pub ready: bool,
    /// Every liveness check passes.
    pub live: bool,
    /// Passing checks.
    pub passing: u32,
    /// Failing checks.
    pub failing: u32,
}

impl Summary {
    /// Summarizes check results.
    pub fn of(checks: &[CheckResult]) -> Self {
        let passing = checks.iter().filter(|c| c.passing).count() as u32;
        Summary {
            ready: checks
                .iter()
                .filter(|c| c.phase == CheckPhase::Readiness)
                .all(|c| c.passing),
            live: checks
                .iter()
                .filter(|c| c.phase == CheckPhase::Liveness)
                .all(|c| c.passing),
            passing,
            failing: checks.len() as u32 - passing,
        }
    }
}

/// A report's check results as they were signed: the JSON text of `checks`, not yet
/// parsed. Two reports whose texts are equal say the same of every check, so a reader
/// that kept the results of the last text need not parse the next one.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawChecks<'a>(Option<&'a serde_json::value::RawValue>);

impl<'a> RawChecks<'a> {
    /// The text (empty when the report had no `checks`).
    pub fn text(&self) -> &'a str {
        self.0.map_or("", |raw| raw.get())
    }

    /// The results the text says.
    pub fn parse(&self) -> serde_json::Result<Vec<CheckResult>> {
        self.0
            .map_or(Ok(Vec::new()), |raw| serde_json::from_str(raw.get()))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawChecks<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Not `Option`: that would read `null` as no checks, where the parsed report
        // refuses it.
        <&'a serde_json::value::RawValue>::deserialize(d).map(|raw| Self(Some(raw)))
    }
}

impl<C> HeartbeatReport<C> {
    /// The same report with its check results held as `checks`.
    pub fn with_checks<D>(self, checks: D) -> HeartbeatReport<D> {
        let Self {
            schema_version,
            aud,
            cluster,
            cluster_uid,
            agent_version,
            incarnation,
            seq,
            iat,
            exp,
            interval_seconds,
            config_generation,
            checks: _,
            summary,
        } = self;
        HeartbeatReport {
            schema_version,
            aud,
            cluster,
            cluster_uid,
            agent_version,
            incarnation,
            seq,
            iat,
            exp,
            interval_seconds,
            config_generation,
            checks,
            summary,
        }
    }
}

impl HeartbeatReport {
    /// The same report with its check results behind an `Arc`, to be shared, not copied.
    pub fn into_shared(mut self) -> HeartbeatReport<std::sync::Arc<[CheckResult]>> {
        let checks = std::mem::take(&mut self.checks);
        self.with_checks(checks.into())
    }
}

impl<C: std::ops::Deref<Target = [CheckResult]>> HeartbeatReport<C> {
    /// Checks the schema version and the size limits; the error says which.
    pub fn validate(&self) -> Result<(), String> {
        if self.schema_version != SCHEMA_VERSION {
            return Err(format!(
                "schemaVersion {} is not supported (this hub reads {SCHEMA_VERSION}); upgrade \
                 the hub or run a matching agent",
                self.schema_version
            ));
        }
        if self.checks.len() > MAX_CHECKS {
            return Err(format!(
                "{} checks exceed the limit of {MAX_CHECKS}",
                self.checks.len()
            ));
        }
        if let Some(c) = self
            .checks
            .iter()
            .find(|c| c.message.len() > MAX_MESSAGE_BYTES)
        {
            return Err(format!(
                "message of check {:?} exceeds {MAX_MESSAGE_BYTES} bytes",
                c.name
            ));
        }
        if let Some(c) = self
            .checks
            .iter()
            .find(|c| json_escaped_len(&c.name) > MAX_CHECK_NAME_BYTES)
        {
            return Err(format!(
                "check name {:?} exceeds {MAX_CHECK_NAME_BYTES} bytes",
                c.name
            ));
        }
        let messages: usize = self
            .checks
            .iter()
            .map(|c| json_escaped_len(&c.message))
            .sum();
        if messages > MAX_REPORT_MESSAGE_BYTES {
            return Err(format!(
                "check messages take {messages} bytes together, more than the \
                 {MAX_REPORT_MESSAGE_BYTES} a report may carry; upgrade the agent (it shares the \
                 budget out)"
            ));
        }
        let identity = [
            ("aud", &self.aud),
            ("cluster.namespace", &self.cluster.namespace),
            ("cluster.name", &self.cluster.name),
            ("clusterUid", &self.cluster_uid),
            ("agentVersion", &self.agent_version),
        ];
        if let Some((field, _)) = identity
            .iter()
            .find(|(_, v)| json_escaped_len(v) > MAX_IDENTITY_BYTES)
        {
            return Err(format!("{field} exceeds {MAX_IDENTITY_BYTES} bytes"));
        }
        if self.interval_seconds == 0 {
            return Err("intervalSeconds must be at least 1".into());
        }
        self.validate_position()
    }

    /// The part of [`Self::validate`] about the position: for a report that differs from
    /// a valid one only in its position and times.
    pub fn validate_position(&self) -> Result<(), String> {
        if self.incarnation > MAX_POSITION || self.seq > MAX_POSITION {
            return Err(format!(
                "incarnation and seq must be at most {MAX_POSITION} (2^63 - 1), so that stores \
                 with signed 64-bit integers keep them in order"
            ));
        }
        Ok(())
    }
}

/// The hub's answer to an accepted heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatAnswer {
    /// The incarnation accepted.
    pub incarnation: u64,
    /// The seq accepted.
    pub accepted_seq: u64,
    /// The current generation of the cluster's effective config; pull it when it differs
    /// from the one applied.
    pub config_generation: u64,
    /// The interval the hub wants, in seconds.
    pub interval_seconds: u32,
    /// An operator asked the hub for a new key (`fleetpulse-hub key rotate`): an agent that
    /// enrolled with a bootstrap token rotates its key before its next heartbeat.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rotate_key: bool,
}

/// The payload of a signed config request (`Authorization: FleetPulse-JWS <jws>`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigRequest {
    /// The hub's identity.
    pub aud: String,
    /// Which cluster's config.
    pub cluster: ClusterId,
    /// Issued at, seconds since the epoch.
    pub iat: i64,
    /// Expires at, seconds since the epoch.
    pub exp: i64,
}

/// A cluster's effective config: its own checks merged with its HealthPolicies'.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfig {
    /// Generation of this config.
    pub generation: u64,
    /// Heartbeat interval, in seconds.
    pub interval_seconds: u32,
    /// The MemberCluster's name, namespace, labels and annotations, which selector
    /// templates (`{{ .Cluster.metadata.name }}`, ...) read.
    #[serde(default)]
    pub cluster_metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    /// Readiness checks.
    #[serde(default)]
    pub readiness_checks: Vec<ClusterCheck>,
    /// Liveness checks.
    #[serde(default)]
    pub liveness_checks: Vec<ClusterCheck>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(incarnation: u64, seq: u64) -> HeartbeatReport {
        HeartbeatReport {
            schema_version: SCHEMA_VERSION,
            aud: "hub".into(),
            cluster: ClusterId::new("fleet", "a"),
            cluster_uid: String::new(),
            agent_version: "t".into(),
            incarnation,
            seq,
            iat: 0,
            exp: 60,
            interval_seconds: 10,
            config_generation: 0,
            checks: vec![],
            summary: Summary::default(),
        }
    }

    #[test]
    fn positions_above_two_to_the_63_are_refused() {
        assert!(report(MAX_POSITION, MAX_POSITION).validate().is_ok());
        assert!(
            report(MAX_POSITION + 1, 1)
                .validate()
                .unwrap_err()
                .contains("2^63")
        );
        assert!(report(1, u64::MAX).validate().is_err());
    }

    #[test]
    fn cluster_ids_parse_only_namespace_slash_name() {
        assert_eq!(
            ClusterId::parse("fleet/a").unwrap(),
            ClusterId::new("fleet", "a")
        );
        for bad in ["a", "/a", "fleet/", "a/b/c"] {
            assert!(ClusterId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_check_result_is_sent_in_whole_seconds_and_read_with_or_without_a_fraction() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        use k8s_openapi::jiff::Timestamp;

        let since: Timestamp = "2026-12-03T19:22:59.123456Z".parse().unwrap();
        let result = CheckResult {
            name: "nodes".into(),
            kind: crate::api::CheckKind::ReadyNodes,
            phase: CheckPhase::Liveness,
            passing: true,
            message: String::new(),
            since: Some(Time(since)),
            consecutive_failures: 0,
            success_rate_percent: None,
        };
        let sent = serde_json::to_value(&result).unwrap();
        assert_eq!(sent["since"], "2026-12-03T19:22:59Z");
        // What an agent of the previous version sends: the same field with a fraction.
        let mut older = sent.clone();
        older["since"] = "2026-12-03T19:22:59.123456Z".into();
        let read: CheckResult = serde_json::from_value(older).unwrap();
        assert_eq!(read.since, Some(Time(since)));
        let read: CheckResult = serde_json::from_value(sent).unwrap();
        let whole: Timestamp = "2026-12-03T19:22:59Z".parse().unwrap();
        assert_eq!(read.since, Some(Time(whole)));
    }

    #[test]
    fn a_report_read_with_its_checks_as_text_is_the_report_once_they_are_parsed() {
        let mut sent = report(1, 2);
        sent.checks = vec![CheckResult {
            name: "api \"server\"".into(),
            kind: crate::api::CheckKind::Http,
            phase: CheckPhase::Liveness,
            passing: false,
            message: "timed out\n".into(),
            since: None,
            consecutive_failures: 3,
            success_rate_percent: Some(12.5),
        }];
        let json = serde_json::to_vec(&sent).unwrap();
        let raw: HeartbeatReport<RawChecks<'_>> = serde_json::from_slice(&json).unwrap();
        let text = raw.checks.text();
        assert!(text.starts_with('[') && text.ends_with(']'), "{text}");
        let checks = raw.checks.parse().unwrap();
        assert_eq!(raw.with_checks(checks), sent);
    }
}

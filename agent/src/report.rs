//! Building what the agent signs: heartbeat reports and config requests.
//!
//! Pure: the clock is an argument. A [`ReportBuilder`] owns the agent's position in its
//! report sequence: the `incarnation` (milliseconds since the Unix epoch at start) and the
//! next `seq`, which grows by one for every report built, retries included. [`fit`] makes
//! every report fit the hub's limits by construction.

use std::time::{SystemTime, UNIX_EPOCH};

use ed25519_dalek::SigningKey;
use fleetpulse_common::VERSION;
use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::{
    CheckResult, ClusterId, ConfigRequest, HeartbeatReport, SCHEMA_VERSION, Summary,
};
use fleetpulse_common::protocol::{TYP_CONFIG_REQUEST, TYP_HEARTBEAT, jws};

pub mod fit;

/// Lifetime of a heartbeat report: `exp = iat + REPORT_LIFETIME_SECS`.
pub const REPORT_LIFETIME_SECS: i64 = 300;
/// Lifetime of a signed config request: `exp = iat + CONFIG_REQUEST_LIFETIME_SECS`. The
/// same as a heartbeat's, so the hub's one freshness rule accepts both or neither: an
/// agent whose clock is minutes off must not send accepted heartbeats while every config
/// pull is refused (it would run none of the checks it is shown as passing).
pub const CONFIG_REQUEST_LIFETIME_SECS: i64 = REPORT_LIFETIME_SECS;

/// The incarnation of an agent started at `now`: milliseconds since the Unix epoch.
pub fn incarnation_at(now: SystemTime) -> u64 {
    now.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Seconds since the Unix epoch (negative before it), as `iat` is written.
pub fn unix_seconds(now: SystemTime) -> i64 {
    match now.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

/// The incarnation to restart at after the hub refused a report as `replayed` or
/// `stale_sequence` with `last_accepted`: one above the hub's when ours is not above it
/// (our clock went backwards, or another agent with this key started in the same
/// millisecond); `None` when ours is already above, so restarting would not help.
pub fn incarnation_above(ours: u64, last_accepted: Position) -> Option<u64> {
    (last_accepted.incarnation >= ours).then(|| last_accepted.incarnation.saturating_add(1))
}

/// Builds the agent's reports, numbering them.
#[derive(Clone, Debug)]
pub struct ReportBuilder {
    aud: String,
    cluster: ClusterId,
    cluster_uid: String,
    incarnation: u64,
    next_seq: u64,
}

impl ReportBuilder {
    /// A builder for an agent of `incarnation`; its first report has seq 1.
    pub fn new(aud: String, cluster: ClusterId, cluster_uid: String, incarnation: u64) -> Self {
        Self {
            aud,
            cluster,
            cluster_uid,
            incarnation,
            next_seq: 1,
        }
    }

    /// The current incarnation.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The seq the next report will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Builds the next report, issued at `now_unix` (seconds), and advances seq. The checks
    /// are fitted to the report limits ([`fit::fit_checks`]), so the hub never refuses a
    /// report for its size.
    pub fn build(
        &mut self,
        now_unix: i64,
        interval_seconds: u32,
        config_generation: u64,
        mut checks: Vec<CheckResult>,
    ) -> HeartbeatReport {
        fit::fit_checks(&mut checks);
        let seq = self.next_seq;
        self.next_seq += 1;
        HeartbeatReport {
            schema_version: SCHEMA_VERSION,
            aud: self.aud.clone(),
            cluster: self.cluster.clone(),
            cluster_uid: self.cluster_uid.clone(),
            agent_version: VERSION.to_owned(),
            incarnation: self.incarnation,
            seq,
            iat: now_unix,
            exp: now_unix + REPORT_LIFETIME_SECS,
            interval_seconds: interval_seconds.max(1),
            config_generation,
            summary: Summary::of(&checks),
            checks,
        }
    }

    /// Applies the incarnation rule ([`incarnation_above`]) after a sequence rejection:
    /// moves above `last_accepted` with seq back at 1 and returns the new incarnation, or
    /// returns `None` and changes nothing.
    pub fn restart_above(&mut self, last_accepted: Position) -> Option<u64> {
        let incarnation = incarnation_above(self.incarnation, last_accepted)?;
        self.incarnation = incarnation;
        self.next_seq = 1;
        Some(incarnation)
    }

    /// The config request for this builder's cluster and audience, issued at `now_unix`.
    pub fn config_request(&self, now_unix: i64) -> ConfigRequest {
        ConfigRequest {
            aud: self.aud.clone(),
            cluster: self.cluster.clone(),
            iat: now_unix,
            exp: now_unix + CONFIG_REQUEST_LIFETIME_SECS,
        }
    }
}

/// Signs a report as the compact JWS the hub expects in a heartbeat body.
pub fn sign_report(key: &SigningKey, report: &HeartbeatReport) -> String {
    let json = serde_json::to_vec(report).expect("a report always serializes");
    jws::sign(key, TYP_HEARTBEAT, &json)
}

/// Signs a config request as the JWS of its `Authorization: FleetPulse-JWS` header.
pub fn sign_config_request(key: &SigningKey, request: &ConfigRequest) -> String {
    let json = serde_json::to_vec(request).expect("a config request always serializes");
    jws::sign(key, TYP_CONFIG_REQUEST, &json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetpulse_common::api::{CheckKind, CheckPhase};
    use fleetpulse_common::protocol::keys;
    use fleetpulse_common::protocol::limits::MAX_MESSAGE_BYTES;
    use fleetpulse_common::protocol::replay::{Freshness, check_fresh};
    use std::time::Duration;

    fn builder() -> ReportBuilder {
        ReportBuilder::new(
            "hub-a".into(),
            ClusterId::new("fleet", "edge-1"),
            "uid".into(),
            7,
        )
    }

    fn check(name: &str, phase: CheckPhase, passing: bool, message: String) -> CheckResult {
        CheckResult {
            name: name.into(),
            kind: CheckKind::Http,
            phase,
            passing,
            message,
            since: None,
            consecutive_failures: 0,
            success_rate_percent: None,
        }
    }

    #[test]
    fn every_report_gets_the_next_seq_and_a_300s_lifetime() {
        let mut b = builder();
        let first = b.build(1_000, 10, 0, vec![]);
        let second = b.build(1_005, 10, 3, vec![]);
        assert_eq!((first.incarnation, first.seq), (7, 1));
        assert_eq!((second.incarnation, second.seq), (7, 2));
        assert_eq!((first.iat, first.exp), (1_000, 1_300));
        assert_eq!((second.iat, second.exp), (1_005, 1_305));
        assert_eq!(second.config_generation, 3);
        assert_eq!(first.schema_version, SCHEMA_VERSION);
        assert_eq!(first.agent_version, VERSION);
        assert_eq!(
            (first.aud.as_str(), first.cluster_uid.as_str()),
            ("hub-a", "uid")
        );
        assert_eq!(b.next_seq(), 3);
        first.validate().unwrap();
    }

    #[test]
    fn summary_reflects_the_checks_and_oversized_messages_are_truncated() {
        let checks = vec![
            check("ready-ok", CheckPhase::Readiness, true, String::new()),
            check(
                "live-bad",
                CheckPhase::Liveness,
                false,
                "x".repeat(MAX_MESSAGE_BYTES * 2),
            ),
        ];
        let report = builder().build(0, 10, 0, checks);
        assert_eq!(
            report.summary,
            Summary {
                ready: true,
                live: false,
                passing: 1,
                failing: 1
            }
        );
        assert!(report.checks[1].message.len() <= MAX_MESSAGE_BYTES);
        report.validate().unwrap();
        let empty = builder().build(0, 10, 0, vec![]);
        assert_eq!(
            empty.summary,
            Summary {
                ready: true,
                live: true,
                passing: 0,
                failing: 0
            }
        );
    }

    #[test]
    fn incarnation_moves_above_the_hubs_only_when_ours_is_not_above() {
        let at = |incarnation, seq| Position { incarnation, seq };
        assert_eq!(incarnation_above(100, at(100, 5)), Some(101));
        assert_eq!(incarnation_above(100, at(250, 1)), Some(251));
        assert_eq!(incarnation_above(100, at(99, 9)), None);

        let mut b = builder();
        b.build(0, 10, 0, vec![]);
        assert_eq!(b.restart_above(at(6, 4)), None);
        assert_eq!((b.incarnation(), b.next_seq()), (7, 2));
        assert_eq!(b.restart_above(at(7, 40)), Some(8));
        assert_eq!((b.incarnation(), b.next_seq()), (8, 1));
        assert_eq!(b.build(0, 10, 0, vec![]).seq, 1);
    }

    #[test]
    fn at_any_clock_offset_the_hub_accepts_a_config_request_exactly_when_it_accepts_a_heartbeat() {
        let hub_now = 1_700_000_000;
        for offset in (-900..=900).step_by(15) {
            let agent_now = hub_now + offset;
            let report = builder().build(agent_now, 10, 0, vec![]);
            let request = builder().config_request(agent_now);
            let f = Freshness::default();
            assert_eq!(
                check_fresh(report.iat, report.exp, hub_now, f).is_ok(),
                check_fresh(request.iat, request.exp, hub_now, f).is_ok(),
                "agent clock {offset}s off the hub's"
            );
        }
        // Five minutes behind, as a badly synchronised node can be: both are accepted.
        let request = builder().config_request(hub_now - 300);
        assert!(check_fresh(request.iat, request.exp, hub_now, Freshness::default()).is_ok());
    }

    #[test]
    fn incarnation_is_milliseconds_since_the_epoch() {
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(incarnation_at(t), 1_700_000_000_123);
        assert_eq!(unix_seconds(t), 1_700_000_000);
    }

    #[test]
    fn signed_report_and_config_request_verify_with_the_agents_key() {
        let key = keys::generate();
        let mut b = builder();
        let report = b.build(1_000, 10, 0, vec![]);
        let jws = sign_report(&key, &report);
        let payload = jws::parse(&jws, TYP_HEARTBEAT)
            .unwrap()
            .verify(&key.verifying_key());
        let back: HeartbeatReport = serde_json::from_slice(&payload.unwrap()).unwrap();
        assert_eq!(back, report);

        let request = b.config_request(1_000);
        assert_eq!(request.exp - request.iat, CONFIG_REQUEST_LIFETIME_SECS);
        let jws = sign_config_request(&key, &request);
        let payload = jws::parse(&jws, TYP_CONFIG_REQUEST)
            .unwrap()
            .verify(&key.verifying_key());
        assert_eq!(
            serde_json::from_slice::<ConfigRequest>(&payload.unwrap()).unwrap(),
            request
        );
    }
}

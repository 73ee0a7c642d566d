use std::time::{Duration, SystemTime};

use fleetpulse_common::api::{CheckKind, CheckPhase};
use fleetpulse_common::protocol::errors::{ErrorBody, RejectCode};
use fleetpulse_common::protocol::report::CheckResult;

use super::AgentMetrics;
use crate::hub_client::HubError;

fn check(name: &str, passing: bool, failures: u32) -> CheckResult {
    CheckResult {
        name: name.into(),
        kind: CheckKind::Http,
        phase: CheckPhase::Liveness,
        passing,
        message: String::new(),
        since: None,
        consecutive_failures: failures,
        success_rate_percent: None,
    }
}

fn rejected(code: RejectCode) -> HubError {
    HubError::Rejected {
        url: "https://hub.example/v1/heartbeat".into(),
        status: 401,
        body: ErrorBody {
            code,
            message: "no".into(),
            last_accepted: None,
        },
        retry_after: None,
    }
}

#[test]
fn failed_heartbeats_are_counted_by_the_hubs_rejection_code_and_accepted_ones_set_the_time() {
    let m = AgentMetrics::default();
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let took = Duration::from_millis(30);
    m.heartbeat(Err(rejected(RejectCode::UnknownKey).failure()), took, at);
    m.heartbeat(Err(rejected(RejectCode::UnknownKey).failure()), took, at);
    assert_eq!(m.last_accepted(), None);
    m.heartbeat(Ok(()), took, at);
    let text = m.encode(&[]);
    for line in [
        "fleetpulse_agent_heartbeats_sent_total 3",
        "fleetpulse_agent_heartbeats_failed_total{reason=\"unknown_key\"} 2",
        "fleetpulse_agent_last_accepted_heartbeat_timestamp_seconds 1800000000",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    assert_eq!(m.last_accepted(), Some(at));
}

#[test]
fn per_check_gauges_follow_the_current_results_and_a_removed_check_disappears() {
    let m = AgentMetrics::default();
    m.check_round(
        [("web", Duration::from_millis(250))],
        Duration::from_millis(300),
        Some(3 << 20),
    );
    m.check_round([], Duration::from_millis(1), None);
    let text = m.encode(&[check("web", false, 4), check("dns", true, 0)]);
    for line in [
        "fleetpulse_agent_check_passing{check=\"web\",phase=\"liveness\",kind=\"http\"} 0",
        "fleetpulse_agent_check_passing{check=\"dns\",phase=\"liveness\",kind=\"http\"} 1",
        "fleetpulse_agent_check_consecutive_failures{check=\"web\",phase=\"liveness\",kind=\"http\"} 4",
        "fleetpulse_agent_check_duration_seconds{check=\"web\"} 0.25",
        "fleetpulse_agent_check_round_duration_seconds_count 1",
        "fleetpulse_agent_lua_memory_bytes 3145728",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    let text = m.encode(&[check("dns", true, 0)]);
    assert!(
        !text.contains("check=\"web\""),
        "web still exposed:\n{text}"
    );
}

#[test]
fn each_heartbeat_round_trip_lands_in_its_bucket_by_outcome() {
    let m = AgentMetrics::default();
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    for ms in [3, 40, 40, 99] {
        m.heartbeat(Ok(()), Duration::from_millis(ms), at);
    }
    m.heartbeat(
        Err(rejected(RejectCode::BadSignature).failure()),
        Duration::from_millis(120),
        at,
    );
    let unreachable = HubError::Unreachable {
        url: "https://hub.example/v1/heartbeat".into(),
        source: "timed out".into(),
    };
    m.heartbeat(Err(unreachable.failure()), Duration::from_secs(12), at);
    let text = m.encode(&[]);
    let bucket = "fleetpulse_agent_heartbeat_duration_seconds_bucket";
    for line in [
        format!("{bucket}{{le=\"0.005\",outcome=\"accepted\"}} 1"),
        format!("{bucket}{{le=\"0.025\",outcome=\"accepted\"}} 1"),
        format!("{bucket}{{le=\"0.05\",outcome=\"accepted\"}} 3"),
        format!("{bucket}{{le=\"0.1\",outcome=\"accepted\"}} 4"),
        format!("{bucket}{{le=\"0.1\",outcome=\"refused\"}} 0"),
        format!("{bucket}{{le=\"0.25\",outcome=\"refused\"}} 1"),
        format!("{bucket}{{le=\"10.0\",outcome=\"no_answer\"}} 0"),
        format!("{bucket}{{le=\"+Inf\",outcome=\"no_answer\"}} 1"),
        "fleetpulse_agent_heartbeat_duration_seconds_count{outcome=\"accepted\"} 4".to_owned(),
        "fleetpulse_agent_heartbeats_sent_total 6".to_owned(),
    ] {
        assert!(text.contains(&line), "{line} missing from:\n{text}");
    }
}

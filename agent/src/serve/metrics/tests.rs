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
    }
}

#[test]
fn failed_heartbeats_are_counted_by_the_hubs_rejection_code_and_accepted_ones_set_the_time() {
    let m = AgentMetrics::default();
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    m.heartbeat(Err(&rejected(RejectCode::UnknownKey)), at);
    m.heartbeat(Err(&rejected(RejectCode::UnknownKey)), at);
    assert_eq!(m.last_accepted(), None);
    m.heartbeat(Ok(()), at);
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

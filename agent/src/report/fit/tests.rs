use fleetpulse_common::api::{CheckKind, CheckPhase};
use fleetpulse_common::protocol::keys;
use fleetpulse_common::protocol::limits::{
    MAX_BODY_BYTES, MAX_CHECKS, MAX_IDENTITY_BYTES, MAX_REPORT_MESSAGE_BYTES, json_escaped_len,
};
use fleetpulse_common::protocol::report::{
    CheckResult, ClusterId, HeartbeatReport, MAX_POSITION, SCHEMA_VERSION, Summary,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::report::sign_report;

/// A name of `n` bytes that costs the most JSON-escaped for its byte length.
fn worst(n: usize) -> String {
    "\u{1}".repeat(n)
}

fn result(i: usize, phase: CheckPhase, passing: bool, message: String) -> CheckResult {
    CheckResult {
        name: format!("check-{i}"),
        kind: CheckKind::ReadyNodes,
        phase,
        passing,
        message,
        since: Some(Time(Timestamp::from_second(253_402_207_199).unwrap())),
        consecutive_failures: u32::MAX,
        success_rate_percent: Some(-1.234_567_890_123_456_7e-300),
    }
}

/// The largest report the hub's validation allows: every identity at its limit in its
/// worst escaping, every number at its widest, [`MAX_CHECKS`] checks with the longest
/// names, and the whole message budget used in the worst escaping.
fn largest_legal_report() -> HeartbeatReport {
    let identity = "\"".repeat(MAX_IDENTITY_BYTES / 2);
    let per_message = MAX_REPORT_MESSAGE_BYTES / MAX_CHECKS;
    let checks: Vec<CheckResult> = (0..MAX_CHECKS)
        .map(|i| {
            let mut c = result(i, CheckPhase::Readiness, false, worst(per_message / 6));
            c.name = worst(MAX_CHECK_NAME_BYTES / 6);
            c.name
                .push_str(&"x".repeat(MAX_CHECK_NAME_BYTES - json_escaped_len(&c.name)));
            c
        })
        .collect();
    HeartbeatReport {
        schema_version: SCHEMA_VERSION,
        aud: identity.clone(),
        cluster: ClusterId::new(identity.clone(), identity.clone()),
        cluster_uid: identity.clone(),
        agent_version: identity,
        incarnation: MAX_POSITION,
        seq: MAX_POSITION,
        iat: i64::MIN,
        exp: i64::MIN,
        interval_seconds: u32::MAX,
        config_generation: u64::MAX,
        summary: Summary {
            ready: false,
            live: false,
            passing: u32::MAX,
            failing: u32::MAX,
        },
        checks,
    }
}

#[test]
fn the_largest_legal_report_fits_the_hubs_body_limit_once_signed() {
    let report = largest_legal_report();
    report.validate().expect("legal by the hub's rules");
    let jws = sign_report(&keys::generate(), &report);
    assert!(
        jws.len() <= MAX_BODY_BYTES,
        "{} bytes signed, limit {MAX_BODY_BYTES}",
        jws.len()
    );
    println!(
        "largest legal report: {} of {MAX_BODY_BYTES} bytes",
        jws.len()
    );
}

#[test]
fn many_long_messages_are_shared_out_so_the_report_stays_legal() {
    // 512 checks with 2 KiB messages each: about 1 MiB of messages before fitting.
    let mut checks: Vec<CheckResult> = (0..MAX_CHECKS)
        .map(|i| result(i, CheckPhase::Liveness, i % 2 == 0, "é\"".repeat(700)))
        .collect();
    fit_checks(&mut checks);
    let total: usize = checks.iter().map(|c| json_escaped_len(&c.message)).sum();
    assert!(total <= MAX_REPORT_MESSAGE_BYTES, "{total}");
    let failing = checks.iter().find(|c| !c.passing).unwrap();
    let passing = checks.iter().find(|c| c.passing).unwrap();
    assert!(
        json_escaped_len(&failing.message) >= json_escaped_len(&passing.message),
        "failing checks keep at least as much of their message"
    );
    assert!(failing.message.ends_with('…'));
}

#[test]
fn short_messages_leave_their_share_to_long_ones() {
    let mut checks = vec![
        result(0, CheckPhase::Liveness, false, "short".into()),
        result(1, CheckPhase::Liveness, false, "x".repeat(2000)),
    ];
    fit_checks(&mut checks);
    assert_eq!(checks[0].message, "short");
    assert_eq!(checks[1].message.len(), 2000, "within budget: untouched");
}

#[test]
fn beyond_the_check_limit_no_failing_check_is_silently_dropped() {
    // 600 passing checks first, then 600 failing ones.
    let mut checks: Vec<CheckResult> = (0..1200)
        .map(|i| {
            let phase = if i % 3 == 0 {
                CheckPhase::Readiness
            } else {
                CheckPhase::Liveness
            };
            result(i, phase, i < 600, String::new())
        })
        .collect();
    fit_checks(&mut checks);
    assert_eq!(checks.len(), MAX_CHECKS);
    assert!(checks.iter().all(|c| !c.passing), "failing ones kept first");
    let summaries: Vec<&CheckResult> = checks.iter().filter(|c| c.name == MORE_CHECKS).collect();
    assert_eq!(summaries.len(), 2, "one per phase");
    let listed = checks.len() - summaries.len();
    let left_out: usize = summaries
        .iter()
        .map(|c| {
            c.message
                .split_whitespace()
                .next()
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert_eq!(
        listed + left_out,
        600,
        "every failing check is listed or counted"
    );
}

#[test]
fn beyond_the_check_limit_passing_checks_give_way_to_failing_ones() {
    let mut checks: Vec<CheckResult> = (0..600)
        .map(|i| result(i, CheckPhase::Liveness, i >= 10, String::new()))
        .collect();
    fit_checks(&mut checks);
    assert_eq!(checks.len(), MAX_CHECKS);
    assert_eq!(checks.iter().filter(|c| !c.passing).count(), 10);
    assert!(checks.iter().all(|c| c.name != MORE_CHECKS));
}

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap()
}

fn timing(failure: u32, success: u32, for_secs: u64) -> Timing {
    Timing {
        failure_threshold: failure,
        success_threshold: success,
        for_duration: Duration::from_secs(for_secs),
        ..Timing::default()
    }
}

fn tracker(phase: CheckPhase, timing: Timing) -> Tracker {
    Tracker::new("c", CheckKind::Lua, phase, timing)
}

#[test]
fn before_the_first_run_readiness_fails_and_liveness_passes() {
    assert!(!tracker(CheckPhase::Readiness, timing(1, 1, 0)).passing());
    let live = tracker(CheckPhase::Liveness, timing(1, 1, 0));
    assert!(live.passing());
    assert_eq!(live.result().message, "not run yet");
    assert_eq!(live.result().since, None);
}

#[test]
fn failure_threshold_needs_consecutive_failures() {
    let mut c = tracker(CheckPhase::Liveness, timing(3, 1, 0));
    c.record(&RunOutcome::fail("a"), t(0));
    c.record(&RunOutcome::fail("b"), t(10));
    assert!(c.passing());
    c.record(&RunOutcome::pass("ok"), t(20));
    c.record(&RunOutcome::fail("c"), t(30));
    c.record(&RunOutcome::fail("d"), t(40));
    assert!(c.passing(), "the success reset the count");
    c.record(&RunOutcome::fail("e"), t(50));
    assert!(!c.passing());
    let r = c.result();
    assert_eq!(
        (r.consecutive_failures, r.message.as_str(), r.since),
        (3, "e", Some(Time(t(50))))
    );
}

#[test]
fn for_duration_needs_continuous_failure_that_long() {
    let mut c = tracker(CheckPhase::Liveness, timing(1, 1, 60));
    c.record(&RunOutcome::fail("x"), t(0));
    c.record(&RunOutcome::fail("x"), t(59));
    assert!(c.passing());
    c.record(&RunOutcome::fail("x"), t(60));
    assert!(!c.passing());
}

#[test]
fn success_threshold_needs_consecutive_successes_to_recover() {
    let mut c = tracker(CheckPhase::Readiness, timing(1, 2, 0));
    c.record(&RunOutcome::pass("1"), t(0));
    assert!(!c.passing(), "readiness needs two successes to begin with");
    c.record(&RunOutcome::pass("2"), t(10));
    assert!(c.passing());
    assert_eq!(c.result().since, Some(Time(t(10))));
    c.record(&RunOutcome::fail("down"), t(20));
    c.record(&RunOutcome::pass("3"), t(30));
    assert!(!c.passing());
    c.record(&RunOutcome::pass("4"), t(40));
    assert!(c.passing());
    assert_eq!(c.result().since, Some(Time(t(40))));
}

#[test]
fn since_moves_only_when_the_verdict_changes() {
    let mut c = tracker(CheckPhase::Liveness, timing(1, 1, 0));
    c.record(&RunOutcome::pass("a"), t(0));
    c.record(&RunOutcome::pass("b"), t(10));
    assert_eq!(c.result().since, Some(Time(t(0))));
}

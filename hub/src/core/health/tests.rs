use std::time::Duration;

use fleetpulse_common::api::{CheckKind, CheckPhase};
use fleetpulse_common::protocol::report::{CheckResult, ClusterId, Summary};

use super::*;

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap()
}

fn check(name: &str, phase: CheckPhase, passing: bool) -> CheckResult {
    CheckResult {
        name: name.into(),
        kind: CheckKind::Lua,
        phase,
        passing,
        message: String::new(),
        since: None,
        consecutive_failures: 0,
        success_rate_percent: None,
    }
}

/// A report from cluster `fleet/a` with `checks` (also used by `fleet::cluster`'s tests).
pub(crate) fn report(uid: &str, checks: Vec<CheckResult>) -> Report {
    Report {
        schema_version: 1,
        aud: "hub".into(),
        cluster: ClusterId::new("fleet", "a"),
        cluster_uid: uid.into(),
        agent_version: "test".into(),
        incarnation: 1,
        seq: 1,
        iat: 0,
        exp: 60,
        interval_seconds: 10,
        config_generation: 0,
        summary: Summary::of(&checks),
        checks: checks.into(),
    }
}

fn unreachable() -> Reachability {
    Reachability::Unreachable {
        silent_for: Duration::from_secs(41),
        ever_reported: true,
    }
}

fn conds(h: &Health) -> [Status; 3] {
    [h.status(REACHABLE), h.status(READY), h.status(HEALTHY)]
}

const D: Debounce = Debounce {
    healthy_after: 2,
    unhealthy_after: 2,
};

#[test]
fn new_cluster_is_unknown_until_it_reports_then_healthy_after_debounce() {
    let mut h = Health::restore(vec![], None, t(0));
    assert_eq!(conds(&h), [Status::Unknown; 3]);
    assert!(h.report(&report("u", vec![]), Evidence::Current, D, t(1)));
    assert_eq!(conds(&h), [Status::True, Status::True, Status::Unknown]);
    assert!(h.report(&report("u", vec![]), Evidence::Current, D, t(2)));
    assert_eq!(conds(&h), [Status::True; 3]);
    assert!(
        !h.report(&report("u", vec![]), Evidence::Current, D, t(3)),
        "steady state writes nothing"
    );
}

#[test]
fn ready_latches_through_a_readiness_failure_after_it_passed_once() {
    let mut h = Health::restore(vec![], None, t(0));
    h.report(
        &report("u", vec![check("r", CheckPhase::Readiness, false)]),
        Evidence::Current,
        D,
        t(1),
    );
    assert_eq!(h.status(READY), Status::False);
    assert_eq!(h.status(HEALTHY), Status::False);
    h.report(
        &report("u", vec![check("r", CheckPhase::Readiness, true)]),
        Evidence::Current,
        D,
        t(2),
    );
    assert_eq!(h.status(READY), Status::True);
    h.report(
        &report("u", vec![check("r", CheckPhase::Readiness, false)]),
        Evidence::Current,
        D,
        t(3),
    );
    h.observe(unreachable(), 40, t(4));
    assert_eq!(
        h.status(READY),
        Status::True,
        "latched through failure and unreachability"
    );
}

#[test]
fn a_single_failing_liveness_report_does_not_flip_healthy() {
    let mut h = Health::restore(vec![], None, t(0));
    for i in 0..2 {
        h.report(&report("u", vec![]), Evidence::Current, D, t(i));
    }
    let bad = report("u", vec![check("l", CheckPhase::Liveness, false)]);
    assert!(!h.report(&bad, Evidence::Current, D, t(3)));
    assert_eq!(h.status(HEALTHY), Status::True);
    h.report(&report("u", vec![]), Evidence::Current, D, t(4));
    assert!(
        !h.report(&bad, Evidence::Current, D, t(5)),
        "the streak restarted after a good report"
    );
    assert!(h.report(&bad, Evidence::Current, D, t(6)));
    assert_eq!(h.status(HEALTHY), Status::False);
    let c = condition::find(h.conditions(), HEALTHY).unwrap();
    assert_eq!(c.reason, reason::LIVENESS_CHECKS_FAILING);
    assert!(c.message.contains('l'));
    assert_eq!(c.last_transition_time.0, t(6));
}

#[test]
fn unreachable_turns_reachable_and_healthy_false_at_once_and_only_once() {
    let mut h = Health::restore(vec![], None, t(0));
    h.report(&report("u", vec![]), Evidence::Current, D, t(1));
    h.report(&report("u", vec![]), Evidence::Current, D, t(2));
    assert!(h.observe(unreachable(), 40, t(50)));
    assert_eq!(conds(&h), [Status::False, Status::True, Status::False]);
    assert!(
        !h.observe(unreachable(), 40, t(51)),
        "no rewrite while it stays unreachable"
    );
    assert!(!h.observe(Reachability::Pending, 40, t(52)));
    h.report(&report("u", vec![]), Evidence::Current, D, t(60));
    assert_eq!(h.status(REACHABLE), Status::True);
    assert_eq!(
        h.status(HEALTHY),
        Status::False,
        "healthy again only after the debounce"
    );
    h.report(&report("u", vec![]), Evidence::Current, D, t(61));
    assert_eq!(h.status(HEALTHY), Status::True);
}

#[test]
fn a_changed_cluster_uid_resets_ready() {
    let mut h = Health::restore(vec![], None, t(0));
    h.report(&report("old", vec![]), Evidence::Current, D, t(1));
    assert_eq!(h.status(READY), Status::True);
    h.report(
        &report("new", vec![check("r", CheckPhase::Readiness, false)]),
        Evidence::Current,
        D,
        t(2),
    );
    let ready = condition::find(h.conditions(), READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", reason::CLUSTER_REPLACED)
    );
    assert_eq!(h.status(HEALTHY), Status::False);
    h.report(
        &report("new", vec![check("r", CheckPhase::Readiness, true)]),
        Evidence::Current,
        D,
        t(3),
    );
    assert_eq!(h.status(READY), Status::True);
}

#[test]
fn restored_conditions_are_kept_as_they_were() {
    let mut h = Health::restore(vec![], None, t(0));
    h.report(&report("u", vec![]), Evidence::Current, D, t(1));
    h.report(&report("u", vec![]), Evidence::Current, D, t(2));
    let restored = Health::restore(h.conditions().to_vec(), Some("u".into()), t(100));
    assert_eq!(conds(&restored), [Status::True; 3]);
    assert_eq!(restored.conditions(), h.conditions());
}

#[test]
fn a_report_made_before_the_agent_pulled_its_config_never_latches_ready() {
    let mut h = Health::restore(vec![], None, t(0));
    // The agent's first heartbeat: sent before its config pull, so no readiness check in it.
    let behind = Evidence::of(0, 1, true);
    assert!(h.report(&report("u", vec![]), behind, D, t(1)));
    assert_eq!(conds(&h), [Status::True, Status::False, Status::False]);
    let ready = condition::find(h.conditions(), READY).unwrap();
    assert_eq!(ready.reason, reason::AWAITING_CONFIG);
    assert!(ready.message.contains("generation 1"), "{}", ready.message);
    assert!(
        !h.report(&report("u", vec![]), behind, D, t(2)),
        "no rewrite"
    );
    // With the config applied, the failing readiness check keeps it not ready ...
    let failing = report("u", vec![check("r", CheckPhase::Readiness, false)]);
    h.report(&failing, Evidence::of(1, 1, true), D, t(3));
    assert_eq!(h.status(READY), Status::False);
    // ... until it passes.
    let passing = report("u", vec![check("r", CheckPhase::Readiness, true)]);
    h.report(&passing, Evidence::of(1, 1, true), D, t(4));
    assert_eq!(h.status(READY), Status::True);
}

#[test]
fn hub_side_checks_that_have_not_run_keep_ready_from_latching() {
    let mut h = Health::restore(vec![], None, t(0));
    h.report(&report("u", vec![]), Evidence::of(1, 1, false), D, t(1));
    assert_eq!(h.status(READY), Status::False);
    h.report(&report("u", vec![]), Evidence::of(1, 1, true), D, t(2));
    assert_eq!(h.status(READY), Status::True);
}

#[test]
fn once_ready_an_older_generation_still_updates_liveness() {
    let mut h = Health::restore(vec![], None, t(0));
    for i in 1..=2 {
        h.report(&report("u", vec![]), Evidence::Current, D, t(i));
    }
    assert_eq!(h.status(HEALTHY), Status::True);
    // The config moved on; the agent has not pulled it yet, and its liveness check fails.
    let bad = report("u", vec![check("l", CheckPhase::Liveness, false)]);
    for i in 3..=4 {
        h.report(&bad, Evidence::of(1, 2, true), D, t(i));
    }
    assert_eq!(h.status(READY), Status::True, "Ready stays latched");
    assert_eq!(h.status(HEALTHY), Status::False, "liveness still followed");
}

#[test]
fn a_cluster_back_with_a_failing_liveness_check_says_so_at_once_without_a_new_transition() {
    let mut h = Health::restore(vec![], None, t(0));
    h.report(&report("u", vec![]), Evidence::Current, D, t(1));
    h.report(&report("u", vec![]), Evidence::Current, D, t(2));
    h.observe(unreachable(), 40, t(50));
    let went = condition::find(h.conditions(), HEALTHY).unwrap().clone();
    assert_eq!(went.reason, reason::UNREACHABLE);
    let failing = vec![check("dns", CheckPhase::Liveness, false)];
    assert!(h.report(&report("u", failing.clone()), Evidence::Current, D, t(60)));
    let now = condition::find(h.conditions(), HEALTHY).unwrap().clone();
    assert_eq!(
        (now.status.as_str(), now.reason.as_str()),
        ("False", reason::LIVENESS_CHECKS_FAILING)
    );
    assert!(now.message.contains("dns"), "{}", now.message);
    assert_eq!(
        now.last_transition_time, went.last_transition_time,
        "still unhealthy: no transition"
    );
    assert!(
        !h.report(&report("u", failing), Evidence::Current, D, t(61)),
        "nothing more to say while it keeps failing"
    );
}

/// Every status as the conditions spell it.
fn parsed(h: &Health) -> [Status; 3] {
    TYPES.map(|type_| {
        condition::find(h.conditions(), type_).map_or(Status::Unknown, |c| Status::parse(&c.status))
    })
}

#[test]
fn the_typed_statuses_always_say_what_the_conditions_say() {
    let restored = vec![Condition {
        type_: READY.into(),
        status: "True".into(),
        reason: reason::READINESS_CHECKS_PASSED.into(),
        message: String::new(),
        last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t(0)),
        observed_generation: None,
    }];
    let mut h = Health::restore(restored, Some("uid".into()), t(0));
    assert_eq!(conds(&h), [Status::Unknown, Status::True, Status::Unknown]);
    let passing = || report("uid", vec![check("l", CheckPhase::Liveness, true)]);
    let failing = || report("uid", vec![check("l", CheckPhase::Liveness, false)]);
    let behind = Evidence::Behind {
        applied: 1,
        wanted: 2,
    };
    let step = |h: &mut Health, i: usize, s: i64| match i {
        0 => h.report(&passing(), Evidence::Current, D, t(s)),
        1 => h.report(&failing(), Evidence::Current, D, t(s)),
        2 => h.observe(unreachable(), 40, t(s)),
        3 => h.report(&report("other", vec![]), Evidence::Current, D, t(s)),
        _ => h.report(&failing(), behind, D, t(s)),
    };
    // Steps in a fixed pseudo-random order (a linear congruential sequence).
    let mut seen = std::collections::HashSet::new();
    let mut x: u64 = 1;
    for s in 0..500 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let i = (x >> 33) as usize % 5;
        step(&mut h, i, s);
        assert_eq!(conds(&h), parsed(&h), "after step {i} at {s}");
        seen.insert(conds(&h));
    }
    assert!(seen.len() >= 4, "the steps reached few states: {seen:?}");
}

#[test]
fn a_changed_interval_changes_the_reachable_message_once_and_a_repeat_changes_nothing() {
    let mut h = Health::restore(vec![], None, t(0));
    let every = |h: &Health| {
        let c = condition::find(h.conditions(), REACHABLE).unwrap();
        c.message.clone()
    };
    let mut r = report("u", vec![]);
    h.report(&r, Evidence::Current, D, t(1));
    h.report(&r, Evidence::Current, D, t(2));
    assert_eq!(every(&h), "the agent reports every 10s");
    r.interval_seconds = 30;
    assert!(h.report(&r, Evidence::Current, D, t(3)));
    assert_eq!(every(&h), "the agent reports every 30s");
    assert!(!h.report(&r, Evidence::Current, D, t(4)));
    // Restored conditions are compared in full once, then by digest.
    let mut restored = Health::restore(h.conditions().to_vec(), Some("u".into()), t(5));
    assert_eq!(restored, h);
    assert!(!restored.report(&r, Evidence::Current, D, t(6)));
    r.interval_seconds = 10;
    assert!(restored.report(&r, Evidence::Current, D, t(7)));
    assert_eq!(every(&restored), "the agent reports every 10s");
}

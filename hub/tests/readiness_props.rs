//! Property: `Ready` never latches on a report that cannot prove readiness: one made with
//! an older config generation than the hub serves, or before the hub-side checks ran.
//! Over random sequences of reports (generation applied vs wanted, readiness checks
//! passing or not), `Ready` is True exactly when some report made with the current config
//! had every readiness check passing.

use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

use fleetpulse_common::api::condition::{READY, Status};
use fleetpulse_common::api::{CheckKind, CheckPhase};
use fleetpulse_common::protocol::report::{
    CheckResult, ClusterId, HeartbeatReport, SCHEMA_VERSION, Summary,
};
use fleetpulse_hub::core::health::{Debounce, Evidence, Health};

#[derive(Clone, Debug)]
struct Step {
    applied: u64,
    wanted: u64,
    hub_checks_ran: bool,
    readiness_passing: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (0..4u64, 1..4u64, any::<bool>(), any::<bool>()).prop_map(
        |(applied, wanted, hub_checks_ran, readiness_passing)| Step {
            applied,
            wanted,
            hub_checks_ran,
            readiness_passing,
        },
    )
}

fn report(step: &Step, seq: u64) -> HeartbeatReport {
    let checks = vec![CheckResult {
        name: "gate".into(),
        kind: CheckKind::Tcp,
        phase: CheckPhase::Readiness,
        passing: step.readiness_passing,
        message: String::new(),
        since: None,
        consecutive_failures: 0,
        success_rate_percent: None,
    }];
    HeartbeatReport {
        schema_version: SCHEMA_VERSION,
        aud: "fleetpulse".into(),
        cluster: ClusterId::new("fleet", "a"),
        cluster_uid: "uid".into(),
        agent_version: "props".into(),
        incarnation: 1,
        seq,
        iat: 0,
        exp: 300,
        interval_seconds: 10,
        config_generation: step.applied,
        summary: Summary::of(&checks),
        checks,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn ready_latches_only_on_a_passing_report_made_with_the_current_config(
        steps in prop::collection::vec(step(), 1..24),
    ) {
        let t0 = Timestamp::from_second(1_700_000_000).unwrap();
        let mut health = Health::restore(vec![], None, t0);
        let mut proved = false;
        for (i, s) in steps.iter().enumerate() {
            let now = t0 + k8s_openapi::jiff::SignedDuration::from_secs(i as i64 + 1);
            let evidence = Evidence::of(s.applied, s.wanted, s.hub_checks_ran);
            health.report(&report(s, i as u64 + 1).into_shared(), evidence, Debounce::default(), now);
            let current = s.applied >= s.wanted && s.hub_checks_ran;
            proved |= current && s.readiness_passing;
            prop_assert_eq!(
                health.status(READY) == Status::True,
                proved,
                "after step {} of {:?}", i, steps
            );
        }
    }
}

use super::*;
use fleetpulse_common::api::MemberClusterStatus;
use fleetpulse_common::api::condition::Status;
use fleetpulse_common::api::condition::{self, HEALTHY, REACHABLE, READY};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

#[test]
fn ages_read_like_kubectl() {
    let now = Timestamp::from_second(100_000).unwrap();
    let ago = |s: i64| Timestamp::from_second(100_000 - s).unwrap();
    assert_eq!(age(ago(5), now), "5s");
    assert_eq!(age(ago(192), now), "3m12s");
    assert_eq!(age(ago(7300), now), "2h1m");
    assert_eq!(age(ago(90_000), now), "1d");
}

#[test]
fn table_shows_health_and_since_when() {
    let now = Timestamp::from_second(10_000).unwrap();
    let mut status = MemberClusterStatus {
        last_heartbeat_time: Some(Time(Timestamp::from_second(9_997).unwrap())),
        ..Default::default()
    };
    for (t, s) in [
        (REACHABLE, Status::True),
        (READY, Status::True),
        (HEALTHY, Status::False),
    ] {
        condition::set(
            &mut status.conditions,
            t,
            s,
            "LivenessChecksFailing",
            "m",
            Timestamp::from_second(9_700).unwrap(),
        );
    }
    let mut mc = MemberCluster::new("edge-1", Default::default());
    mc.metadata.namespace = Some("fleet".into());
    mc.status = Some(status);
    let never = MemberCluster::new("edge-2", Default::default());
    let out = member_cluster_table(&[mc.clone(), never], now, false);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("NAMESPACE"));
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        cells[..6],
        ["fleet", "edge-1", "True", "True", "False", "5m0s"]
    );
    assert!(lines[1].contains("3s ago") && lines[1].contains("LivenessChecksFailing"));
    assert!(lines[2].contains("never") && lines[2].contains("Unknown"));
}

#[test]
fn wide_table_names_each_failing_check_with_its_message() {
    use fleetpulse_common::api::{CheckKind, CheckPhase, CheckResult};
    let check = |name: &str, passing: bool, message: &str| CheckResult {
        name: name.into(),
        kind: CheckKind::Lua,
        phase: CheckPhase::Liveness,
        passing,
        message: message.into(),
        since: None,
        consecutive_failures: u32::from(!passing),
        success_rate_percent: None,
    };
    let mut mc = MemberCluster::new("edge-1", Default::default());
    mc.status = Some(MemberClusterStatus {
        checks: vec![
            check("nodes", true, "3 of 3 Ready"),
            check("dns", false, ";; connection timed out\nno servers"),
            check("keptn", false, "error rate 7% > 5%"),
        ],
        ..Default::default()
    });
    let now = Timestamp::from_second(10_000).unwrap();
    let narrow = member_cluster_table(std::slice::from_ref(&mc), now, false);
    assert!(!narrow.contains("FAILING CHECKS") && !narrow.contains("dns"));
    let wide = member_cluster_table(&[mc], now, true);
    let header = wide.lines().next().unwrap();
    assert!(header.ends_with("FAILING CHECKS"), "{wide}");
    assert!(
        wide.lines()
            .nth(1)
            .unwrap()
            .ends_with("dns: ;; connection timed out no servers; keptn: error rate 7% > 5%"),
        "{wide}"
    );
    assert_eq!(failing_checks(&[check("nodes", true, "")]), "-");
}

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::{ClusterRef, SetStatus};
use fleetpulse_common::protocol::report::ClusterId;

use super::*;
use crate::fleet::transitions::TransitionLog;

fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

fn assert_has(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
}

fn condition(type_: &str, status: &str, reason: &str, at: Timestamp) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: String::new(),
        last_transition_time: Time(at),
        observed_generation: None,
    }
}

#[test]
fn every_metric_is_exposed_with_its_prefix() {
    let mut registry = Registry::default();
    let m = Metrics::register(&mut registry);
    m.heartbeat("accepted");
    m.config_request("unknown_key");
    let set = SetKey::ClusterSet("prod".into());
    m.failover(
        &set,
        &[(
            ClusterId::new("fleet", "a"),
            "Healthy=False (HeartbeatsStopped)".into(),
        )],
    );
    m.brake(&BrakeState::Settling {
        until: std::time::Instant::now(),
    });
    assert_has(
        &encode(&registry),
        &[
            "fleetpulse_hub_heartbeats_total{result=\"accepted\"} 1",
            "fleetpulse_hub_config_requests_total{result=\"unknown_key\"} 1",
            "fleetpulse_hub_rejected_reports_total{code=\"unknown_key\",request=\"config\"} 1",
            "fleetpulse_hub_status_writes_total 0",
            "fleetpulse_hub_failovers_total{kind=\"ClusterSet\",set=\"prod\",reason=\"HeartbeatsStopped\"} 1",
            "fleetpulse_hub_partition_brake_engaged 1",
            "fleetpulse_hub_partition_brake_state{state=\"Settling\"} 1",
            "fleetpulse_hub_partition_brake_state{state=\"Released\"} 0",
            "fleetpulse_hub_leader 1",
        ],
    );
}

#[test]
fn set_gauges_follow_the_statuses_of_the_last_scrape_and_a_deleted_set_disappears() {
    let mut registry = Registry::default();
    let m = Metrics::register(&mut registry);
    let status = SetStatus {
        selected_cluster_refs: vec![ClusterRef {
            name: "a".into(),
            ..Default::default()
        }],
        conditions: vec![condition(
            "Satisfied",
            "False",
            "NotEnoughEligibleClusters",
            Timestamp::now(),
        )],
        ..Default::default()
    };
    let key = SetKey::Set(ClusterId::new("apps", "web"));
    m.scrape([(&key, &status)], Vec::new);
    assert_has(
        &encode(&registry),
        &[
            "fleetpulse_hub_set_selected_clusters{kind=\"Set\",set=\"apps/web\"} 1",
            "fleetpulse_hub_set_satisfied{kind=\"Set\",set=\"apps/web\"} 0",
        ],
    );
    m.scrape([], Vec::new);
    assert!(!encode(&registry).contains("apps/web"));
}

#[test]
fn a_transition_is_counted_once_and_conditions_restored_from_before_start_are_not() {
    let mut registry = Registry::default();
    let m = Metrics::register(&mut registry);
    let id = ClusterId::new("fleet", "edge");
    let long_ago = Timestamp::from_second(1_000_000).unwrap();
    let now = Timestamp::now();
    let first = [
        condition("Reachable", "False", "HeartbeatsStopped", now),
        condition("Ready", "True", "ChecksPassed", long_ago),
    ];
    let mut log = TransitionLog::default();
    for _ in 0..2 {
        let observed = log.observe(&first);
        m.transitions.written(observed.first, &observed.changed);
    }
    let text = encode(&registry);
    assert_has(
        &text,
        &[
            "fleetpulse_hub_condition_transitions_total{condition=\"Reachable\",status=\"False\",reason=\"HeartbeatsStopped\"} 1",
        ],
    );
    assert!(!text.contains("condition=\"Ready\""), "{text}");
    assert!(
        !text.contains("fleetpulse_hub_cluster_condition{"),
        "{text}"
    );

    // After the first write, every change counts, whatever its time says.
    let later = [
        condition("Reachable", "False", "HeartbeatsStopped", now),
        condition("Ready", "False", "ChecksFailing", long_ago),
    ];
    let observed = log.observe(&later);
    m.transitions.written(observed.first, &observed.changed);
    assert_has(
        &encode(&registry),
        &[
            "fleetpulse_hub_condition_transitions_total{condition=\"Reachable\",status=\"False\",reason=\"HeartbeatsStopped\"} 1",
            "fleetpulse_hub_condition_transitions_total{condition=\"Ready\",status=\"False\",reason=\"ChecksFailing\"} 1",
        ],
    );

    m.transitions.enable_per_cluster();
    m.scrape([], || vec![(id.clone(), first.to_vec())]);
    assert_has(
        &encode(&registry),
        &[
            "fleetpulse_hub_cluster_condition{cluster_namespace=\"fleet\",cluster=\"edge\",condition=\"Reachable\",status=\"False\"} 1",
            "fleetpulse_hub_cluster_condition{cluster_namespace=\"fleet\",cluster=\"edge\",condition=\"Reachable\",status=\"True\"} 0",
        ],
    );
}

//! The hub's Kubernetes API writes are O(transitions) plus at most one refresh per cluster
//! per refresh interval (issue 7's budget), counted by the write-amplification simulation.
//! These are counts, not timings: the simulation's clock is simulated.

use std::time::Duration;

use fleetpulse_tests::write_amplification::{Plan, run};

fn plan(status_refresh_secs: u64, outages_per_cluster_hour: f64) -> Plan {
    Plan {
        clusters: 60,
        duration: Duration::from_secs(30 * 60),
        interval: Duration::from_secs(10),
        grace: Duration::from_secs(40),
        status_refresh: Duration::from_secs(status_refresh_secs),
        outages_per_cluster_hour,
        outage: Duration::from_secs(120),
        cluster_sets: 3,
        warmup: Duration::from_secs(120),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_fleet_writes_only_its_hub_state_once_per_flush_without_the_refresh() {
    let c = run(&plan(0, 0.0)).await.unwrap();
    assert!(c.heartbeats >= 60 * 180, "{c:?}");
    assert!(c.warmup > 0, "the first conditions are written: {c:?}");
    // 60 clusters are one shard: one write per flush, not one per heartbeat.
    assert_eq!(c.hub_state, c.flushes, "{c:?}");
    assert_eq!(
        c.total, c.hub_state,
        "steady heartbeats write nothing else: {c:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refresh_stays_within_one_write_per_cluster_per_five_minutes() {
    let c = run(&plan(300, 0.0)).await.unwrap();
    let refresh = c.cluster_status - c.transition_status;
    // 30 minutes: six refreshes per cluster.
    assert!(refresh <= 60 * 6, "{c:?}");
    assert!(refresh >= 60 * 5, "the refresh runs: {c:?}");
    assert_eq!(
        c.total - c.hub_state,
        refresh,
        "nothing else is written: {c:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outages_cost_a_handful_of_writes_each() {
    let c = run(&plan(0, 1.0)).await.unwrap();
    assert!(c.outages >= 5, "{c:?}");
    assert!(
        c.transition_status >= c.outages,
        "each outage is a transition: {c:?}"
    );
    // Down and up (status, Events), sometimes a failover (set status, labels, Event).
    assert!(c.total - c.hub_state <= 12 * c.outages, "{c:?}");
}

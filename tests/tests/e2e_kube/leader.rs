//! Scenario 7: hub restarts and leader changes. Two real hub replicas with leader election
//! behind a Service stand-in that routes to the Pod labelled leader (as the chart runs
//! them): a graceful stop of the leader hands over at once, a restarted replica stands by,
//! and a crashed leader is replaced when its Lease expires. None of it marks a cluster
//! unreachable or moves the ClusterSet, and the new leader writes no status for it.

use std::collections::BTreeSet;
use std::time::Instant;

use fleetpulse_common::api::condition::{REACHABLE, Status};
use fleetpulse_tests::kube_fleet::{FleetSpec, KubeFleet, NAMESPACE};

use super::{DEADLINE, until_healthy};

/// Writes of the hub's decisions (status, labels, Events), without its Lease and Pod label.
fn decision_writes(fleet: &KubeFleet) -> u64 {
    fleet
        .hub_writes()
        .iter()
        .filter(|((resource, _), _)| resource != "leases" && resource != "pods")
        .map(|(_, n)| n)
        .sum()
}

/// Names of the Events in the fleet's namespace and in `default` (ClusterSet Events).
async fn event_names(fleet: &KubeFleet) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for ns in [NAMESPACE, "default"] {
        for e in fleet.events(ns).await {
            names.extend(e.metadata.name);
        }
    }
    names
}

/// Every member is Reachable now, the ClusterSet still selects `selected`, and the hub
/// (whichever replica leads) accepted heartbeats for longer than the grace period.
async fn assert_undisturbed(fleet: &KubeFleet, selected: &str) -> anyhow::Result<()> {
    let rounds = u64::from(fleet.spec.grace_secs + 2) * fleet.members.len() as u64;
    fleet.wait_heartbeats(rounds, DEADLINE).await?;
    for m in &fleet.members {
        assert_eq!(
            fleet.condition(&m.name, REACHABLE).await,
            Status::True,
            "{} stayed reachable",
            m.name
        );
    }
    assert_eq!(
        fleet.selected().await,
        vec![selected.to_owned()],
        "no failover"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_7_hub_restarts_and_leader_changes_cause_no_failover() -> anyhow::Result<()> {
    let mut fleet = KubeFleet::prepare(FleetSpec::default()).await?;
    fleet.start_replicas(&["hub-a", "hub-b"]).await?;
    for i in 0..fleet.members.len() {
        fleet.start_agent(i)?;
    }
    let (mut fleet, first) = until_healthy(fleet).await?;
    let selected = fleet.members[first].name.clone();
    // Let the first selection's label and Events land before counting.
    fleet
        .wait_heartbeats(3 * fleet.members.len() as u64, DEADLINE)
        .await?;
    let (before, events_before) = (decision_writes(&fleet), event_names(&fleet).await);

    // A graceful stop of the leader (a rolling update): the standby leads at once.
    let fault = Instant::now();
    anyhow::ensure!(fleet.stop_replica("hub-a")?, "hub-a did not stop cleanly");
    let handover = fleet.wait_leader("hub-b", DEADLINE).await?;
    assert_undisturbed(&fleet, &selected).await?;

    // The stopped replica comes back and stands by.
    fleet.start_replica("hub-a").await?;
    assert_eq!(fleet.leader().await.as_deref(), Some("hub-b"));

    // The leader crashes: the standby leads once the Lease expires.
    fleet.kill_replica("hub-b")?;
    let crash = Instant::now();
    let takeover = fleet.wait_leader("hub-a", DEADLINE).await?;
    assert_undisturbed(&fleet, &selected).await?;

    let mut new_events = Vec::new();
    for ns in [NAMESPACE, "default"] {
        for e in fleet.events(ns).await {
            if e.metadata
                .name
                .as_ref()
                .is_some_and(|n| !events_before.contains(n))
            {
                new_events.push((e.reason, e.note));
            }
        }
    }
    assert!(
        new_events.is_empty(),
        "no transition, no failover: {new_events:?}"
    );
    let after = decision_writes(&fleet);
    println!(
        "scenario=7 writes={} since_fault={} handover_ms={} crash_takeover_ms={} fault_to_failover_ms=none ledger={:?}",
        fleet.hub_write_total(),
        after - before,
        handover.as_millis(),
        takeover.as_millis(),
        fleet.hub_writes()
    );
    println!(
        "scenario=7 total_ms={} crash_ms={}",
        fault.elapsed().as_millis(),
        crash.elapsed().as_millis()
    );
    assert_eq!(
        after, before,
        "a leader change writes no status, label or Event"
    );
    Ok(())
}

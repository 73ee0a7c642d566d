//! Multi-cluster scenarios with the real binaries: `fleetpulse-hub serve --kube` against a
//! simulated management cluster and one `fleetpulse-agent run` per simulated member
//! cluster (see `fleetpulse_tests::kube_fleet`). Faults are injected into the member
//! simulators or the agent processes; outcomes are read from the management cluster, where
//! the hub's writes are also counted: every scenario prints and bounds them, and checks
//! that they stop while heartbeats continue (O(transitions), not O(heartbeats)).
//!
//! Timing: 1 s heartbeats, 4 s grace. Deadlines are generous; nothing sleeps a fixed time.

/// Scenarios 3 to 6: liveness checks fail (nodes, a KeptnMetric, a pod check), and recovery.
#[path = "e2e_kube/checks.rs"]
mod checks;

/// Scenario 7: hub restarts and leader changes with two replicas.
#[path = "e2e_kube/leader.rs"]
mod leader;

use std::time::{Duration, Instant};

use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, READY, Status};
use k8s_openapi::api::events::v1::Event;

use fleetpulse_tests::kube_fleet::{CLUSTER_SET, FleetSpec, KubeFleet, NAMESPACE};

/// Deadline of every wait: a loaded 2-core machine runs two scenarios at once.
const DEADLINE: Duration = Duration::from_secs(45);
/// Membership label of the ClusterSet on selected MemberClusters.
const LABEL: &str = "clusterset.fleetpulse.io/primary";

/// Launches the fleet, then [`until_healthy`].
async fn healthy_fleet(spec: FleetSpec) -> anyhow::Result<(KubeFleet, usize)> {
    until_healthy(KubeFleet::launch(spec).await?).await
}

/// Waits until every member is Reachable, Ready and Healthy and the ClusterSet selects
/// one; returns the fleet and the selected member's index.
async fn until_healthy(fleet: KubeFleet) -> anyhow::Result<(KubeFleet, usize)> {
    for type_ in [REACHABLE, READY, HEALTHY] {
        fleet.wait_all(type_, Status::True, DEADLINE).await?;
    }
    let (first, _) = fleet
        .wait_selected("the ClusterSet to select a member", DEADLINE, |_| true)
        .await?;
    let i = fleet.index(&first)?;
    Ok((fleet, i))
}

/// Waits until the ClusterSet selects a member other than `old`; returns its index and the
/// time since `fault`.
async fn wait_failover(
    fleet: &KubeFleet,
    old: usize,
    fault: Instant,
) -> anyhow::Result<(usize, u128)> {
    let old_name = fleet.members[old].name.clone();
    let (new, _) = fleet
        .wait_selected("the ClusterSet to fail over", DEADLINE, |s| s != old_name)
        .await?;
    let ms = fault.elapsed().as_millis();
    let status = fleet
        .cluster_set()
        .await
        .and_then(|cs| cs.status)
        .unwrap_or_default();
    let reason = status.last_failover_reason.unwrap_or_default();
    assert!(
        reason.contains(&old_name),
        "failover reason names {old_name}: {reason}"
    );
    Ok((fleet.index(&new)?, ms))
}

/// Whether MemberCluster `name` carries the ClusterSet's membership label.
async fn labelled(fleet: &KubeFleet, name: &str) -> bool {
    let mc = fleet.member_cluster(name).await.unwrap_or_default();
    mc.metadata.labels.unwrap_or_default().contains_key(LABEL)
}

/// After a failover from `old` to `new`: the label moved, and the hub goes quiet again.
async fn assert_settled_after_failover(
    fleet: &KubeFleet,
    old: usize,
    new: usize,
) -> anyhow::Result<()> {
    let (old, new) = (&fleet.members[old].name, &fleet.members[new].name);
    fleetpulse_tests::wait::until_some("the membership label to move", DEADLINE, move || async move {
        (!labelled(fleet, old).await && labelled(fleet, new).await).then_some(())
    })
    .await?;
    let running = fleet.members.len() as u64 - 1;
    fleet.assert_no_writes_for(3 * running, DEADLINE).await
}

/// Prints the scenario's line and the hub's write ledger, and fails if the hub wrote more
/// than `bound` times since its write total was `since` (the fault): a budget per
/// transition (status patches, membership labels, Events), far below one per heartbeat.
fn report(scenario: u32, fleet: &KubeFleet, since: u64, bound: u64, extra: &str) {
    let total = fleet.hub_write_total();
    let ledger = fleet.hub_writes();
    println!(
        "scenario={scenario} writes={total} since_fault={} {extra}",
        total - since
    );
    println!("scenario={scenario} ledger={ledger:?}");
    assert!(
        total - since <= bound,
        "scenario {scenario}: {} writes > {bound}: {ledger:?}",
        total - since
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_1_every_member_becomes_ready_and_healthy_and_the_hub_then_stays_quiet()
-> anyhow::Result<()> {
    let started = Instant::now();
    let (fleet, _) = healthy_fleet(FleetSpec::default()).await?;
    let ready_ms = started.elapsed().as_millis();
    for m in &fleet.members {
        let status = fleet
            .member_cluster(&m.name)
            .await
            .and_then(|mc| mc.status)
            .unwrap_or_default();
        let agent = status.agent.unwrap_or_default();
        assert_eq!(
            agent.cluster_uid,
            m.cluster.sim.cluster_uid(),
            "{}: UID of its own cluster",
            m.name
        );
        let readyz = status.checks.iter().find(|c| c.name == "apiserver-readyz");
        assert!(
            readyz.is_some_and(|c| c.passing),
            "{}: {:?}",
            m.name,
            status.checks
        );
    }
    fleet
        .assert_no_writes_for(3 * fleet.members.len() as u64, DEADLINE)
        .await?;
    // Per member: three status patches (config generation, Reachable+Ready, Healthy) and
    // an Event per condition change; the set: its status, first selection, label, Events.
    report(
        1,
        &fleet,
        0,
        12 * fleet.members.len() as u64 + 8,
        &format!("all_healthy_ms={ready_ms}"),
    );
    Ok(())
}

/// The Events the hub records for a failover away from `victim`: `FailedOver` regarding the
/// ClusterSet (cluster-scoped, so in `default`), and the victim's `Reachable` transition
/// regarding its MemberCluster.
async fn assert_failover_events(fleet: &KubeFleet, victim: &str) -> anyhow::Result<()> {
    let failed_over = |e: &Event| e.reason.as_deref() == Some("FailedOver");
    fleet
        .wait_event("default", "ClusterSet", CLUSTER_SET, DEADLINE, failed_over)
        .await?;
    let unreachable = |e: &Event| {
        e.action.as_deref() == Some(REACHABLE)
            && e.note.as_deref().unwrap_or_default().contains("-> False")
    };
    fleet
        .wait_event(NAMESPACE, "MemberCluster", victim, DEADLINE, unreachable)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_2_a_killed_agent_makes_its_cluster_unreachable_and_the_set_fails_over()
-> anyhow::Result<()> {
    let (mut fleet, first) = healthy_fleet(FleetSpec::default()).await?;
    let before = fleet.hub_write_total();
    fleet.kill_agent(first)?;
    let fault = Instant::now();
    fleet
        .wait_condition(first, REACHABLE, Status::False, DEADLINE)
        .await?;
    let (new, ms) = wait_failover(&fleet, first, fault).await?;
    let name = &fleet.members[first].name;
    assert_eq!(fleet.condition(name, HEALTHY).await, Status::False);
    assert_eq!(
        fleet.condition(name, READY).await,
        Status::True,
        "Ready latches"
    );
    let grace = u128::from(fleet.spec.grace_secs - fleet.spec.interval_secs) * 1000;
    assert!(ms >= grace, "not before the grace period: {ms} ms");
    assert_settled_after_failover(&fleet, first, new).await?;
    assert_failover_events(&fleet, name).await?;
    // The victim's status, the set's status, two label moves, and an Event for each of
    // Reachable, Healthy, the failover and the set's Satisfied.
    report(2, &fleet, before, 12, &format!("fault_to_failover_ms={ms}"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_8_most_members_cut_off_at_once_engage_the_brake_and_nothing_fails_over()
-> anyhow::Result<()> {
    use fleetpulse_hub::fleet::sets::REASSIGNMENT_FROZEN;
    let spec = FleetSpec {
        members: 5,
        ..FleetSpec::default()
    };
    let (fleet, first) = healthy_fleet(spec).await?;
    let keep = (0..fleet.members.len())
        .find(|&i| i != first)
        .expect("another member");
    let cut: Vec<usize> = (0..fleet.members.len()).filter(|&i| i != keep).collect();
    let (labels_before, writes_before) = (
        fleet.hub_write_count("memberclusters", "patch"),
        fleet.hub_write_total(),
    );
    for &i in &cut {
        fleet.pause_agent(i)?;
    }
    let fault = Instant::now();
    let f = &fleet;
    let frozen = move || async move {
        (f.set_condition(REASSIGNMENT_FROZEN).await == Status::True).then_some(())
    };
    fleetpulse_tests::wait::until_some("the brake to freeze the ClusterSet", DEADLINE, frozen)
        .await?;
    let brake_ms = fault.elapsed().as_millis();
    for &i in &cut {
        fleet
            .wait_condition(i, REACHABLE, Status::False, DEADLINE)
            .await?;
    }
    // Without the brake the set would now fail over to the one member still reporting.
    fleet.wait_heartbeats(3, DEADLINE).await?;
    let selected_name = fleet.members[first].name.clone();
    assert_eq!(
        fleet.selected().await,
        std::slice::from_ref(&selected_name),
        "the selection holds"
    );
    for &i in &cut {
        fleet.resume_agent(i)?;
    }
    let released = move || async move {
        (f.set_condition(REASSIGNMENT_FROZEN).await == Status::False).then_some(())
    };
    fleetpulse_tests::wait::until_some("the brake to release and settle", DEADLINE, released)
        .await?;
    fleet.wait_all(HEALTHY, Status::True, DEADLINE).await?;
    fleet.assert_no_writes_for(10, DEADLINE).await?;
    let status = fleet
        .cluster_set()
        .await
        .and_then(|cs| cs.status)
        .unwrap_or_default();
    assert_eq!(
        fleet.selected().await,
        [selected_name],
        "no spurious failover after the return"
    );
    assert_eq!(
        status.last_failover_time, None,
        "{:?}",
        status.last_failover_reason
    );
    assert_eq!(
        fleet.hub_write_count("memberclusters", "patch"),
        labels_before,
        "no membership move"
    );
    // Four members down and back (status patches and Events each way), the set frozen,
    // released and unsatisfied meanwhile: O(transitions), not O(heartbeats).
    report(
        8,
        &fleet,
        writes_before,
        50,
        &format!("brake_engaged_ms={brake_ms}"),
    );
    Ok(())
}

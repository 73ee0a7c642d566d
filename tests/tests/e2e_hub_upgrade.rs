//! Hub changes nobody notices, with the real hub binaries in Kubernetes mode: two replicas
//! with leader election behind a Service stand-in, and fifty agents driven by hand at a
//! one-second interval (each counts every answer it gets).
//!
//! 1. A rolling upgrade: the leader is stopped (SIGTERM), the standby takes over, and the
//!    stopped replica starts again (the upgraded Pod: a new process, a new standby). No heartbeat is refused, no cluster changes condition, the set does
//!    not move.
//! 2. The leader is killed (SIGKILL): the standby takes over once the Lease expires. No
//!    cluster changes condition and the set does not move; refusals are counted (the hub
//!    state is at most a flush old, so there should be none).
//! 3. The leader is killed and, while no hub leads, a cluster dies: the new leader judges it
//!    unreachable within its grace period (plus the detector's tick) of its return.
//!
//! Prints, with `--nocapture`:
//! `hub-upgrade: agents=N handovers=K refused_heartbeats=R false_verdicts=F set_changes=S
//! dead_detected_after_return_s=D` and the hand-over times.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, Status};
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_tests::fleet::SimCluster;
use fleetpulse_tests::hand_agent::HandAgent;
use fleetpulse_tests::kube_fleet::{FleetSpec, KubeFleet, NAMESPACE, observe};
use fleetpulse_tests::wait;

const AGENTS: usize = 50;
const GRACE_SECS: u32 = 6;

/// What the hand-driven agents saw, counted since the last [`Tally::take`].
#[derive(Default)]
struct Tally {
    accepted: AtomicU64,
    /// Answers that refuse the heartbeat itself (any error but `503 unavailable`).
    refused: AtomicU64,
    /// `503 unavailable` from a replica that does not lead, or no answer at all.
    retried: AtomicU64,
    /// Milliseconds since the test started at the latest accepted heartbeat.
    last_accepted_ms: AtomicU64,
}

/// One agent: sends a heartbeat a second (retrying five times a second while no hub
/// answers), counts the answers, and stops for good when `dead` is set.
async fn drive(mut agent: HandAgent, tally: Arc<Tally>, dead: Arc<AtomicBool>, t0: Instant) {
    let interval = Duration::from_secs(1);
    let mut next = tokio::time::Instant::now();
    while !dead.load(Ordering::Relaxed) {
        tokio::time::sleep_until(next).await;
        let sent = agent.next_heartbeat(false).send().await;
        match sent {
            Ok(response) => match answered(response).await {
                (200, _, generation) => {
                    agent.apply_generation(generation);
                    tally.accepted.fetch_add(1, Ordering::Relaxed);
                    let at = t0.elapsed().as_millis() as u64;
                    tally.last_accepted_ms.fetch_max(at, Ordering::Relaxed);
                    next += interval;
                }
                (503, code, _) if code == "unavailable" || code.is_empty() => {
                    tally.retried.fetch_add(1, Ordering::Relaxed);
                    next = tokio::time::Instant::now() + Duration::from_millis(200);
                }
                (status, code, _) => {
                    eprintln!("heartbeat refused: {status} {code}");
                    tally.refused.fetch_add(1, Ordering::Relaxed);
                    next += interval;
                }
            },
            Err(_) => {
                tally.retried.fetch_add(1, Ordering::Relaxed);
                next = tokio::time::Instant::now() + Duration::from_millis(200);
            }
        }
        next = next.max(tokio::time::Instant::now());
    }
}

/// Status, error code and, on success, the config generation the hub serves.
async fn answered(response: reqwest::Response) -> (u16, String, u64) {
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    let code = body["code"].as_str().unwrap_or_default().to_owned();
    (
        status,
        code,
        body["configGeneration"].as_u64().unwrap_or_default(),
    )
}

/// Waits until `more` heartbeats more than now were accepted.
async fn wait_accepted(tally: &Tally, more: u64) -> anyhow::Result<()> {
    let target = tally.accepted.load(Ordering::Relaxed) + more;
    let what = format!("{more} more heartbeats accepted");
    let probe = || async { (tally.accepted.load(Ordering::Relaxed) >= target).then_some(()) };
    wait::until_some(&what, Duration::from_secs(60), probe).await?;
    Ok(())
}

/// Waits until some heartbeat is accepted after `since` (ms from `t0`); returns when.
async fn first_accepted_after(tally: &Tally, since: u64) -> anyhow::Result<u64> {
    let what = "a heartbeat accepted by the new leader";
    let probe = || async {
        let at = tally.last_accepted_ms.load(Ordering::Relaxed);
        (at > since).then_some(at)
    };
    Ok(wait::until_some(what, Duration::from_secs(60), probe)
        .await?
        .0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_changes_cost_no_refusal_no_false_verdict_and_a_death_meanwhile_is_judged_in_grace()
-> anyhow::Result<()> {
    let spec = FleetSpec::for_replicas(AGENTS, GRACE_SECS);
    let mut fleet = KubeFleet::prepare(spec).await?;
    fleet.start_replicas(&["hub-a", "hub-b"]).await?;
    let hub = fleet.hub_url()?;
    let http = fleet.agent_http();
    let t0 = Instant::now();
    let tally = Arc::new(Tally::default());
    let mut dead = BTreeMap::new();
    for (name, key) in &fleet.keys {
        let cluster = SimCluster {
            id: ClusterId::new(NAMESPACE, name),
            key: key.clone(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let agent = HandAgent::new(http.clone(), &hub, &cluster);
        tokio::spawn(drive(agent, tally.clone(), stop.clone(), t0));
        dead.insert(name.clone(), stop);
    }
    fleet
        .wait_all(HEALTHY, Status::True, Duration::from_secs(60))
        .await?;
    fleet
        .wait_selected("a selected cluster", Duration::from_secs(30), |_| true)
        .await?;
    let ms = || t0.elapsed().as_millis() as u64;
    let mut handovers = Vec::new();

    // 1. A rolling upgrade: the leader stops, the standby leads, a new standby starts.
    let (before, set_before) = fleet.verdicts().await;
    let refused_before = tally.refused.load(Ordering::Relaxed);
    assert!(fleet.stop_replica("hub-a")?, "the leader stops cleanly");
    let exited = ms();
    fleet.wait_leader("hub-b", Duration::from_secs(30)).await?;
    handovers.push(first_accepted_after(&tally, exited).await? - exited);
    // The upgraded replica starts (a new process, a new standby) where the old one was.
    fleet.start_replica("hub-a").await?;
    // A few intervals under the new leader, then read what it decided.
    wait_accepted(&tally, AGENTS as u64 * 5).await?;
    let (after, set_after) = fleet.verdicts().await;
    let refused = tally.refused.load(Ordering::Relaxed) - refused_before;
    let false_verdicts = observe::changed(&before, &after);
    let set_changes = u64::from(set_before != set_after);

    // 2. The leader crashes: the standby takes over once the Lease expires.
    let (before, set_before) = fleet.verdicts().await;
    let refused_before = tally.refused.load(Ordering::Relaxed);
    fleet.kill_replica("hub-b")?;
    let killed = ms();
    fleet.wait_leader("hub-a", Duration::from_secs(30)).await?;
    // Counted from when the new replica leads: a report the killed one answered in its
    // last moment is not the new leader's.
    handovers.push(first_accepted_after(&tally, ms()).await? - killed);
    fleet.start_replica("hub-b").await?;
    wait_accepted(&tally, AGENTS as u64 * 5).await?;
    let (after, set_after) = fleet.verdicts().await;
    let crash_refused = tally.refused.load(Ordering::Relaxed) - refused_before;
    let crash_false = observe::changed(&before, &after);
    let crash_set_changes = u64::from(set_before != set_after);

    // 3. The leader crashes and a cluster dies while no hub leads.
    let victim = fleet.members.last().unwrap().name.clone();
    fleet.kill_replica("hub-a")?;
    let killed = ms();
    dead[&victim].store(true, Ordering::Relaxed);
    fleet.wait_leader("hub-b", Duration::from_secs(30)).await?;
    // The hub is back when it accepts again: counted from when the new replica leads, so
    // a report the killed one took in its last moment does not count as the return.
    let returned = first_accepted_after(&tally, ms()).await?;
    handovers.push(returned - killed);
    let i = fleet.index(&victim)?;
    let limit = Duration::from_secs(u64::from(GRACE_SECS) * 4);
    fleet
        .wait_condition(i, REACHABLE, Status::False, limit)
        .await?;
    let detected_after_return = (ms() - returned) as f64 / 1000.0;

    let (refused_total, false_total) = (
        refused + crash_refused,
        false_verdicts.len() + crash_false.len(),
    );
    println!(
        "hub-upgrade: agents={AGENTS} handovers={} refused_heartbeats={refused_total} \
         false_verdicts={false_total} set_changes={} dead_detected_after_return_s={detected_after_return:.1}",
        handovers.len(),
        set_changes + crash_set_changes,
    );
    println!(
        "hub-upgrade: handover_ms clean={} crash={} crash_with_death={} (old leader gone to first heartbeat accepted by the new one; a crash waits for the Lease to expire)",
        handovers[0], handovers[1], handovers[2]
    );
    assert_eq!(refused, 0, "a clean hand-over refuses no heartbeat");
    assert!(
        false_verdicts.is_empty(),
        "a clean hand-over changes no verdict: {false_verdicts:?}"
    );
    assert_eq!(
        set_changes, 0,
        "a clean hand-over moves no set: {set_before} -> {set_after}"
    );
    assert!(
        crash_false.is_empty(),
        "a crash hand-over changes no verdict: {crash_false:?}"
    );
    assert_eq!(crash_set_changes, 0, "a crash hand-over moves no set");
    assert!(
        detected_after_return <= f64::from(GRACE_SECS) + 1.0,
        "a cluster that died while no hub led is judged within its grace period (and a tick) of the hub's return: {detected_after_return}s"
    );
    Ok(())
}

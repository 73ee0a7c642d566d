//! The real hub binaries sharing the fleet: three `fleetpulse-hub serve --kube --shards`
//! replicas on one management simulator behind a Service stand-in, and forty agents (the
//! agent's own hub client, following redirects to the owner of their shard) at a
//! one-second interval. The shards balance; one replica is killed (SIGKILL: no release,
//! no last flush) and its shards move to the others within the lease duration; it is
//! started again and gets its share back. No cluster changes condition and the set
//! (spanning every shard) does not move. Then the replica owning the selected cluster is
//! cut off from its agents (every cluster of its shards falls silent at once, while it
//! still reaches the API server; another replica evaluates the sets): it judges them
//! unreachable, and its partition brake, published on its Leases, keeps the set where it
//! is until they return.
//!
//! Prints `shards: replicas=3 shards=S moved=M false_verdicts=F set_changes=C
//! max_unowned_s=U` (`moved`: shard moves over the run, `max_unowned_s`: from the kill to
//! the last of its shards held by another replica).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fleetpulse_agent::Url;
use fleetpulse_agent::hub_client::HttpHubClient;
use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, Status};
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::ids::shard_of;
use fleetpulse_tests::fleet::SimCluster;
use fleetpulse_tests::hand_agent::HandAgent;
use fleetpulse_tests::hand_agent::driven::{Tally, drive};
use fleetpulse_tests::kube_fleet::{FleetSpec, KubeFleet, NAMESPACE, observe};
use fleetpulse_tests::wait;

const AGENTS: usize = 40;
const SHARDS: u32 = 12;
const GRACE_SECS: u32 = 10;
/// The replicas' lease (`kube_fleet`'s, for every replica it runs).
const LEASE: Duration = Duration::from_secs(3);
const REPLICAS: [&str; 3] = ["hub-a", "hub-b", "hub-c"];
/// How long balancing may take.
const WITHIN: Duration = Duration::from_secs(60);

/// Shards whose holder differs between two readings.
fn moves(before: &BTreeMap<u32, String>, after: &BTreeMap<u32, String>) -> usize {
    (0..SHARDS)
        .filter(|k| before.get(k) != after.get(k))
        .count()
}

/// Waits until `more` heartbeats more than now were accepted.
async fn accepted_more(tally: &Tally, more: u64) -> anyhow::Result<()> {
    let target = tally.accepted() + more;
    let what = format!("{more} more heartbeats accepted");
    let probe = || async { (tally.accepted() >= target).then_some(()) };
    wait::until_some(&what, Duration::from_secs(60), probe).await?;
    Ok(())
}

/// The agents, each driven until its flag is set.
struct Agents {
    hub: Url,
    ca: Vec<u8>,
    tally: Arc<Tally>,
    t0: Instant,
    stops: BTreeMap<String, Arc<AtomicBool>>,
}

impl Agents {
    /// Starts (or starts again, as a new process would: a new boot) the agent of `name`.
    fn start(&mut self, fleet: &KubeFleet, name: &str) -> anyhow::Result<()> {
        let key = (fleet.keys.iter().find(|(n, _)| n == name))
            .map(|(_, key)| key.clone())
            .ok_or_else(|| anyhow::anyhow!("no key for {name}"))?;
        let id = ClusterId::new(NAMESPACE, name);
        let client = HttpHubClient::new(&self.hub, &id, Some(&self.ca), false)?;
        let agent = HandAgent::new(
            fleet.agent_http(),
            self.hub.as_str(),
            &SimCluster { id, key },
        );
        let stop = Arc::new(AtomicBool::new(false));
        let (tally, interval) = (self.tally.clone(), Duration::from_secs(1));
        tokio::spawn(drive(agent, client, interval, tally, stop.clone(), self.t0));
        self.stops.insert(name.to_owned(), stop);
        Ok(())
    }

    fn stop(&self, name: &str) {
        self.stops[name].store(true, Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hub_binaries_share_the_fleet_and_a_killed_replica_costs_no_false_verdict()
-> anyhow::Result<()> {
    let spec = FleetSpec::for_replicas(AGENTS, GRACE_SECS);
    let mut fleet = KubeFleet::prepare(spec).await?;
    fleet.start_sharded(&REPLICAS, SHARDS).await?;
    let tally = Arc::new(Tally::default());
    let mut agents = Agents {
        hub: Url::parse(&fleet.hub_url()?)?,
        ca: std::fs::read(&fleet.pki.ca_cert)?,
        tally: tally.clone(),
        t0: Instant::now(),
        stops: BTreeMap::new(),
    };
    let names: Vec<String> = fleet.members.iter().map(|m| m.name.clone()).collect();
    for name in &names {
        agents.start(&fleet, name)?;
    }
    let at_start = fleet.wait_balanced(&REPLICAS, WITHIN).await?;
    fleet
        .wait_all(HEALTHY, Status::True, Duration::from_secs(60))
        .await?;
    fleet
        .wait_selected("a selected cluster", Duration::from_secs(30), |_| true)
        .await?;
    accepted_more(&tally, AGENTS as u64 * 3).await?;
    let mut moved = 0;

    // 1. A replica crashes: its shards move once their Leases expire.
    let (before, set_before) = fleet.verdicts().await;
    let victim = REPLICAS[1];
    let lost: Vec<u32> = (at_start.iter())
        .filter(|(_, h)| *h == victim)
        .map(|(k, _)| *k)
        .collect();
    fleet.kill_replica(victim)?;
    let killed = Instant::now();
    let survivors = [REPLICAS[0], REPLICAS[2]];
    let after_kill = fleet.wait_balanced(&survivors, WITHIN).await?;
    let max_unowned = killed.elapsed();
    moved += moves(&at_start, &after_kill);
    assert!(
        lost.iter().all(|k| after_kill[k] != victim),
        "every shard of the killed replica moved: {after_kill:?}"
    );
    accepted_more(&tally, AGENTS as u64 * 5).await?;
    let (after, set_after) = fleet.verdicts().await;
    let mut false_verdicts = observe::changed(&before, &after);
    let mut set_changes = u64::from(set_before != set_after);

    // 2. It starts again (a new process on its former address) and gets its share back.
    let (before, set_before) = fleet.verdicts().await;
    fleet.start_shard_replica(victim).await?;
    let rejoined = fleet.wait_balanced(&REPLICAS, WITHIN).await?;
    moved += moves(&after_kill, &rejoined);
    accepted_more(&tally, AGENTS as u64 * 5).await?;
    let (after, set_after) = fleet.verdicts().await;
    false_verdicts.extend(observe::changed(&before, &after));
    set_changes += u64::from(set_before != set_after);

    // 3. The replica owning the selected cluster is cut off from its agents. That cluster
    // must sit in a shard the set evaluator (shard 0's owner) does not own, so the cut-off
    // replica's brake reaches the evaluator through its Leases: while it does not, its
    // agent stops until the set fails over to another cluster, and starts again.
    for _ in 0..12 {
        let holders = fleet.shard_holders().await?;
        let selected = fleet.selected().await;
        let chosen = (selected.first().cloned())
            .ok_or_else(|| anyhow::anyhow!("nothing selected: {selected:?}"))?;
        let shard = shard_of(&ClusterId::new(NAMESPACE, &chosen), SHARDS);
        if holders.get(&shard) != holders.get(&0) {
            break;
        }
        agents.stop(&chosen);
        let what = format!("a cluster other than {chosen} selected");
        let limit = Duration::from_secs(u64::from(GRACE_SECS) * 4);
        fleet
            .wait_selected(&what, limit, |name| name != chosen)
            .await?;
        agents.start(&fleet, &chosen)?;
        let i = fleet.index(&chosen)?;
        fleet
            .wait_condition(i, REACHABLE, Status::True, limit)
            .await?;
    }
    let (_, set_before) = fleet.verdicts().await;
    let holders = fleet.shard_holders().await?;
    let holder_of = |name: &str| holders.get(&shard_of(&ClusterId::new(NAMESPACE, name), SHARDS));
    let selected = fleet.selected().await;
    let cut = (selected.first().and_then(|s| holder_of(s)).cloned())
        .ok_or_else(|| anyhow::anyhow!("no holder for the selected cluster {selected:?}"))?;
    let silenced: Vec<&String> = names
        .iter()
        .filter(|n| holder_of(n) == Some(&cut))
        .collect();
    for name in &silenced {
        agents.stop(name);
    }
    for name in &silenced {
        let limit = Duration::from_secs(u64::from(GRACE_SECS) * 4);
        fleet
            .wait_condition(fleet.index(name)?, REACHABLE, Status::False, limit)
            .await?;
    }
    // The set evaluator has seen every one of those verdicts a few heartbeats later.
    accepted_more(&tally, (AGENTS - silenced.len()) as u64 * 3).await?;
    let (_, set_cut) = fleet.verdicts().await;
    for name in &silenced {
        agents.start(&fleet, name)?;
    }
    fleet
        .wait_all(REACHABLE, Status::True, Duration::from_secs(60))
        .await?;
    accepted_more(&tally, AGENTS as u64 * 3).await?;
    let (_, set_back) = fleet.verdicts().await;
    let cut_set_changes = u64::from(set_before != set_cut) + u64::from(set_cut != set_back);
    for name in &names {
        agents.stop(name);
    }

    println!(
        "shards: replicas={} shards={SHARDS} moved={moved} false_verdicts={} set_changes={set_changes} \
         max_unowned_s={:.1}",
        REPLICAS.len(),
        false_verdicts.len(),
        max_unowned.as_secs_f64(),
    );
    println!(
        "shards: agents={AGENTS} accepted={} refused={} retried={} (retried: no owner yet, or the killed replica's address)",
        tally.accepted(),
        tally.refused(),
        tally.retried()
    );
    println!(
        "shards: cut off from its agents: replica={cut} silenced={} set_changes={cut_set_changes}",
        silenced.len(),
    );
    assert_ne!(
        holders.get(&0),
        Some(&cut),
        "the cut-off replica does not evaluate the sets itself"
    );
    assert_eq!(
        cut_set_changes, 0,
        "a replica cut off from its agents moves no set: {set_before} -> {set_cut} -> {set_back}"
    );
    assert!(
        false_verdicts.is_empty(),
        "a shard move changes no verdict: {false_verdicts:?}"
    );
    assert_eq!(set_changes, 0, "a shard move moves no set");
    assert_eq!(tally.refused(), 0, "no heartbeat is refused for good");
    assert!(
        max_unowned <= LEASE * 2,
        "the killed replica's shards moved within the lease and a round: {max_unowned:?}"
    );
    Ok(())
}

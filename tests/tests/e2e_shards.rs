//! Hub replicas sharing the fleet through shard Leases, on kubesim.
//!
//! The Lease loop (in-process replicas, each running only the loop): three replicas
//! balance the shards and never own one shard at once; one lost replica's shards move
//! to the others within the lease duration; a replica added back gets its share; and a
//! replica whose renewals the API server refuses stops acting on its shards before their
//! Leases expire for anyone else. Then the hub state by shard ([`state`]), in-process
//! hubs with agents and a set while shards move ([`in_process`]), and the real hub
//! binaries with agents while a replica is killed and started again ([`binaries`]).
//!
//! Prints, with `--nocapture`, the times above, the Lease writes at balance, and
//! `shards in-process: replicas=3 shards=S clusters=N moved_in_s=M false_verdicts=F
//! set_changes=C accepted=A retried=R`.

/// The hub-state objects by Lease shard, and the take-over hook.
#[path = "e2e_shards/state.rs"]
mod state;

/// Three in-process hubs, agents through a Service stand-in, a replica leaving and joining.
#[path = "e2e_shards/in_process.rs"]
mod in_process;

/// Three real hub binaries, forty agents, a replica killed and started again.
#[path = "e2e_shards/binaries.rs"]
mod binaries;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fleetpulse_hub::kubernetes::shard_leases::{self, Shards};
use fleetpulse_hub::shards::ShardSettings;
use fleetpulse_kubesim::{KubeSim, eventually};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const SHARDS: u32 = 12;
const LEASE: Duration = Duration::from_secs(3);

fn settings(identity: &str) -> ShardSettings {
    ShardSettings {
        namespace: "default".into(),
        identity: identity.into(),
        shards: SHARDS,
        duration: LEASE,
        url: Some(format!("https://{identity}.hub.example:8443")),
    }
}

struct Replica {
    shards: Shards,
    task: JoinHandle<()>,
    stop: CancellationToken,
}

fn replica(sim: &KubeSim, identity: &str) -> Replica {
    let stop = CancellationToken::new();
    let (shards, task) = shard_leases::start(sim.client(), settings(identity), stop.clone());
    Replica { shards, task, stop }
}

/// Each replica's owned shards, and whether any shard is owned by two at once.
fn owned(replicas: &BTreeMap<&str, Replica>) -> (BTreeMap<String, Vec<u32>>, bool) {
    let owned: BTreeMap<String, Vec<u32>> = (replicas.iter())
        .map(|(name, r)| (name.to_string(), r.shards.owned()))
        .collect();
    let total: usize = owned.values().map(Vec::len).sum();
    let mut all: Vec<u32> = owned.values().flatten().copied().collect();
    all.sort_unstable();
    all.dedup();
    (owned.clone(), all.len() != total)
}

/// Waits until every shard is owned and each replica owns `SHARDS / n` or one more,
/// checking every 50 ms that no shard is owned twice; returns how long it took.
async fn balanced(replicas: &BTreeMap<&str, Replica>, within: Duration) -> Duration {
    let started = Instant::now();
    let n = replicas.len() as u32;
    loop {
        let (owned, doubled) = owned(replicas);
        assert!(!doubled, "a shard owned by two replicas at once: {owned:?}");
        let counts: Vec<u32> = owned.values().map(|v| v.len() as u32).collect();
        if counts.iter().sum::<u32>() == SHARDS
            && counts
                .iter()
                .all(|c| (SHARDS / n..=SHARDS.div_ceil(n)).contains(c))
        {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "not balanced within {within:?}: {owned:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_balance_shard_leases_move_a_lost_replicas_shards_and_share_with_a_new_one() {
    let sim = KubeSim::new();
    let mut replicas: BTreeMap<&str, Replica> = BTreeMap::new();
    for name in ["hub-a", "hub-b", "hub-c"] {
        replicas.insert(name, replica(&sim, name));
    }
    let took = balanced(&replicas, Duration::from_secs(60)).await;
    println!(
        "shard-leases: balanced three replicas in {:.1}s",
        took.as_secs_f64()
    );
    // The steady state's cost on the API server: every shard renewed each round.
    let steady = owned(&replicas).0;
    let (writes, window) = (sim.write_count("leases", "update"), Instant::now());
    tokio::time::sleep(Duration::from_secs(6)).await;
    let rate =
        (sim.write_count("leases", "update") - writes) as f64 / window.elapsed().as_secs_f64();
    println!(
        "shard-leases: steady state {rate:.1} Lease writes/s for {SHARDS} shards at a {}s lease ({:.2} per shard per second)",
        LEASE.as_secs(),
        rate / f64::from(SHARDS)
    );
    let per_round = f64::from(SHARDS) / settings("hub-a").renew_every().as_secs_f64();
    assert!(
        rate <= per_round * 1.2,
        "one renewal per shard per round, no churn: {rate:.1}/s"
    );
    assert_eq!(owned(&replicas).0, steady, "nothing moved at balance");
    let owner = replicas["hub-a"]
        .shards
        .owner(replicas["hub-b"].shards.owned()[0]);
    assert_eq!(
        owner.map(|o| (o.identity, o.url)),
        Some((
            "hub-b".into(),
            Some("https://hub-b.hub.example:8443".into())
        )),
        "a replica knows another's shard by its Lease, with the URL agents reach it at"
    );

    // hub-c is lost (its loop stops without releasing anything, as a killed Pod's).
    let lost = replicas.remove("hub-c").unwrap();
    let had = lost.shards.owned();
    lost.task.abort();
    let moved = balanced(&replicas, Duration::from_secs(30)).await;
    println!(
        "shard-leases: {} shards of a lost replica moved in {:.1}s",
        had.len(),
        moved.as_secs_f64()
    );
    assert!(
        moved < LEASE * 3,
        "moved within the lease duration and a couple of rounds: {moved:?}"
    );

    // A replica is added back: it gets its share, and only its share moves.
    let before: BTreeMap<String, Vec<u32>> = owned(&replicas).0;
    replicas.insert("hub-d", replica(&sim, "hub-d"));
    let joined = balanced(&replicas, Duration::from_secs(60)).await;
    let after = owned(&replicas).0;
    let kept: usize = (before.iter())
        .map(|(name, shards)| shards.iter().filter(|k| after[name].contains(k)).count())
        .sum();
    println!(
        "shard-leases: a new replica got {} shards in {:.1}s",
        after["hub-d"].len(),
        joined.as_secs_f64()
    );
    assert_eq!(
        kept + after["hub-d"].len(),
        SHARDS as usize,
        "only the newcomer's share moved: {before:?} -> {after:?}"
    );

    // A graceful stop releases at once: the others take the shards without waiting.
    let stopping = replicas.remove("hub-d").unwrap();
    stopping.stop.cancel();
    stopping.task.await.unwrap();
    let released = balanced(&replicas, Duration::from_secs(30)).await;
    assert!(
        released < LEASE,
        "released shards are taken before a lease could expire: {released:?}"
    );
    for r in replicas.values() {
        r.stop.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_cannot_renew_stops_acting_on_its_shards_before_their_leases_expire() {
    let sim = KubeSim::new();
    let a = replica(&sim, "hub-a");
    eventually(Duration::from_secs(30), || async {
        (a.shards.owned().len() == SHARDS as usize).then_some(())
    })
    .await
    .expect("a lone replica takes every shard");

    sim.refuse("leases", "update", true);
    let refused = Instant::now();
    eventually(Duration::from_secs(30), || async {
        a.shards.owned().is_empty().then_some(())
    })
    .await
    .expect("it stops acting on every shard");
    let stopped = refused.elapsed();
    println!(
        "shard-leases: stopped acting {:.1}s after renewals began to fail",
        stopped.as_secs_f64()
    );
    // Its last landed renewal was at most a round before the refusal, and another
    // replica may take a shard only a whole lease after it.
    assert!(
        stopped < LEASE - settings("hub-a").renew_every() / 2,
        "stopped acting {stopped:?} after the refusal, before the leases expire ({LEASE:?})"
    );
    sim.refuse("leases", "update", false);
    eventually(Duration::from_secs(30), || async {
        (a.shards.owned().len() == SHARDS as usize).then_some(())
    })
    .await
    .expect("it acts again once its renewals land");
    a.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicas_frozen_brake_reaches_the_others_through_its_leases_and_its_release_too() {
    use fleetpulse_hub::fleet::Ownership;

    let sim = KubeSim::new();
    let replicas: BTreeMap<&str, Replica> = ["hub-a", "hub-b"]
        .into_iter()
        .map(|name| (name, replica(&sim, name)))
        .collect();
    balanced(&replicas, Duration::from_secs(60)).await;
    let (a, b) = (&replicas["hub-a"].shards, &replicas["hub-b"].shards);
    assert!(!a.brake_elsewhere() && !b.brake_elsewhere());

    // hub-a's clusters went quiet at once: its next renewals say so, and hub-b reads it.
    a.publish_brake(true);
    let started = Instant::now();
    eventually(Duration::from_secs(30), || async {
        b.brake_elsewhere().then_some(())
    })
    .await
    .expect("hub-b sees hub-a's brake");
    let seen = started.elapsed();
    assert!(
        !a.brake_elsewhere(),
        "a replica's own brake is not another's"
    );
    a.publish_brake(false);
    eventually(Duration::from_secs(30), || async {
        (!b.brake_elsewhere()).then_some(())
    })
    .await
    .expect("hub-b sees the release");
    println!(
        "shard-leases: another replica saw a frozen brake {:.1}s after it was published (a round is {:.1}s)",
        seen.as_secs_f64(),
        settings("hub-a").renew_every().as_secs_f64()
    );
    assert!(
        seen <= settings("hub-a").renew_every() * 4,
        "seen within a few rounds (one to write, one to read): {seen:?}"
    );
    for r in replicas.values() {
        r.stop.cancel();
    }
}

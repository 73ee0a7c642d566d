//! The real hub and agents over a faulty network (a fault-injecting proxy per agent, as the
//! kernels here have no netem): jitter and failed requests cause no false verdict, a
//! blackhole is detected within the grace period and a tick, and a short soak.

use std::time::{Duration, Instant};

use fleetpulse_common::api::condition::Status;
use fleetpulse_tests::fault_proxy::scenario::{Binaries, FaultyFleet};
use fleetpulse_tests::fault_proxy::soak::{self, SoakSettings, wait_for_status};
use fleetpulse_tests::fault_proxy::{Direction, Faults};

const INTERVAL: u32 = 1;
const GRACE: u32 = 5;
/// How long the network stays bad before the blackhole.
const FAULTY_FOR: Duration = Duration::from_secs(60);
/// One-way delay and its jitter either way: round trips of 0 to 600 ms, arrivals moving by
/// about ±30 % of the 1 s interval.
const DELAY: Duration = Duration::from_millis(150);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jitter_and_failed_requests_give_no_false_verdict_then_a_blackhole_is_detected_in_grace()
-> anyhow::Result<()> {
    let bins = Binaries::beside_this_executable()?;
    let fleet = FaultyFleet::start(&bins, 2, INTERVAL, GRACE).await?;
    let before = fleet.reachable_all().await.expect("the hub answers");
    for p in fleet.proxies() {
        p.set(Direction::ToUpstream, Faults::jittery(DELAY, DELAY, 0.05));
        p.set(Direction::ToClient, Faults::jittery(DELAY, DELAY, 0.0));
    }
    let start = Instant::now();
    let mut polls = 0;
    while start.elapsed() < FAULTY_FOR {
        if let Some(now) = fleet.reachable_all().await {
            polls += 1;
            assert!(
                now.iter().all(|r| r.status == Status::True),
                "a cluster was called unreachable under jitter and 5 % failures: {now:?}{}",
                fleet.hub_log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let after = fleet.reachable_all().await.expect("the hub answers");
    assert_eq!(
        before.iter().map(|r| &r.since).collect::<Vec<_>>(),
        after.iter().map(|r| &r.since).collect::<Vec<_>>(),
        "Reachable never changed, not even between polls"
    );
    assert_eq!(fleet.unreachable_verdicts(), 0, "{}", fleet.hub_log_tail());
    for (i, p) in fleet.proxies().iter().enumerate() {
        let resets = p
            .counters()
            .resets
            .load(std::sync::atomic::Ordering::Relaxed);
        eprintln!(
            "cluster {i}: {} connections, {resets} reset by the proxy, {polls} polls",
            p.connections()
        );
        assert!(resets >= 1, "the proxy failed no request for cluster {i}");
        // Beyond the resets: one connection per pool (heartbeats, hedges) and one for
        // each request that timed out (its pool is replaced). Reconnecting per heartbeat
        // would be one per second.
        let heartbeats = FAULTY_FOR.as_secs() / u64::from(INTERVAL);
        assert!(
            p.connections() <= resets + heartbeats / 4,
            "the agent keeps its connections between heartbeats: {} connections for \
             {resets} resets in {heartbeats} heartbeats",
            p.connections()
        );
    }

    fleet.proxy(0).set_both(Faults::blackhole());
    let blackholed = Instant::now();
    let detected = wait_for_status(&fleet, 0, Status::False, Duration::from_secs(30)).await;
    let took = blackholed.elapsed();
    eprintln!("blackhole detected after {took:?} (grace {GRACE} s, tick 1 s)");
    assert!(
        detected.is_some(),
        "the blackholed cluster was never called unreachable{}",
        fleet.hub_log_tail()
    );
    // The last heartbeat arrived at most an interval plus a slow round trip before the
    // blackhole; the verdict comes at the first tick after the grace period.
    assert!(
        took >= Duration::from_secs(u64::from(GRACE) - 2),
        "{took:?}"
    );
    assert!(
        took <= Duration::from_secs(u64::from(GRACE) + 1 + 3),
        "{took:?}"
    );
    let others = fleet.reachable_all().await.expect("the hub answers");
    assert_eq!(others[1].status, Status::True, "{others:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_has_no_false_verdict_and_detects_every_blackhole() -> anyhow::Result<()> {
    let report = soak::run(
        &Binaries::beside_this_executable()?,
        SoakSettings {
            duration: Duration::from_secs(30),
            clusters: 2,
            interval: INTERVAL,
            grace: GRACE,
            blackhole_every: Duration::from_secs(10),
            delay: DELAY,
            drop: 0.05,
            wedge_every: Some(Duration::from_secs(7)),
        },
    )
    .await?;
    eprintln!("{report}");
    assert_eq!(report.false_unreachable, 0, "{report}");
    assert_eq!(report.missed, 0, "{report}");
    assert!(!report.detections.is_empty(), "{report}");
    assert!(report.wedges >= 2, "{report}");
    assert!(
        report
            .detections
            .iter()
            .all(|d| *d <= f64::from(GRACE) + 4.0),
        "{report}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_connection_that_dies_silently_costs_no_verdict() -> anyhow::Result<()> {
    let bins = Binaries::beside_this_executable()?;
    let fleet = FaultyFleet::start(&bins, 1, INTERVAL, GRACE).await?;
    let before = fleet.reachable_all().await.expect("the hub answers");
    let connections = fleet.proxy(0).connections();
    // The path under the agent's kept connection dies without a reset; a new connection
    // gets through (a NAT entry dropped, a load balancer failed over).
    fleet.proxy(0).wedge_open_connections();
    let wedged = Instant::now();
    let watch_for = Duration::from_secs(3 * u64::from(GRACE));
    while wedged.elapsed() < watch_for {
        if let Some(now) = fleet.reachable_all().await {
            assert!(
                now.iter().all(|r| r.status == Status::True),
                "the cluster was called unreachable after its connection died: {now:?}{}",
                fleet.hub_log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let after = fleet.reachable_all().await.expect("the hub answers");
    assert_eq!(before[0].since, after[0].since, "Reachable never changed");
    assert_eq!(fleet.unreachable_verdicts(), 0, "{}", fleet.hub_log_tail());
    assert!(
        fleet.proxy(0).connections() > connections,
        "the agent opened a new connection"
    );
    Ok(())
}

//! The soak behind the `soak` binary (and its short run in CI): a [`FaultyFleet`] under
//! jitter and failed requests for a fixed duration, with one cluster blackholed at a time
//! at intervals and, between them, one cluster's kept connections wedged (they die
//! silently, which must cost no verdict); counts false verdicts and measures the
//! detection of each blackhole.

use std::time::{Duration, Instant};

use fleetpulse_common::api::condition::Status;
use rand::Rng;

use super::scenario::{Binaries, FaultyFleet};
use super::{Direction, Faults};

/// The settings of one soak.
#[derive(Clone, Copy, Debug)]
pub struct SoakSettings {
    /// How long it runs.
    pub duration: Duration,
    /// Clusters (one agent and one proxy each).
    pub clusters: usize,
    /// Heartbeat interval, seconds.
    pub interval: u32,
    /// Grace period, seconds.
    pub grace: u32,
    /// Time between the end of one blackhole and the start of the next.
    pub blackhole_every: Duration,
    /// One-way delay, and its jitter either way.
    pub delay: Duration,
    /// Share of requests (chunks to the hub) that fail.
    pub drop: f64,
    /// Time between wedges of one cluster's open connections (`None`: no wedges).
    pub wedge_every: Option<Duration>,
}

/// What a soak measured.
#[derive(Clone, Debug, Default)]
pub struct SoakReport {
    /// Seconds run.
    pub seconds: f64,
    /// Clusters.
    pub clusters: usize,
    /// Unreachable verdicts on clusters that were not blackholed.
    pub false_unreachable: usize,
    /// Seconds from each blackhole to its verdict, sorted.
    pub detections: Vec<f64>,
    /// Blackholes not detected within grace + 10 s.
    pub missed: usize,
    /// Times one cluster's open connections were wedged.
    pub wedges: usize,
    /// Connections reset by the injected failures.
    pub resets: u64,
    /// Connections the agents opened.
    pub connections: u64,
    /// Chunks forwarded.
    pub forwarded: u64,
}

impl std::fmt::Display for SoakReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = |p: f64| {
            self.detections
                .get(((p * self.detections.len() as f64).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(f64::NAN)
        };
        write!(
            f,
            "soak seconds={:.0} clusters={} false_unreachable={} blackholes={} missed={} \
             wedges={} detect_p50_s={:.1} detect_max_s={:.1} resets={} connections={} chunks_forwarded={}",
            self.seconds,
            self.clusters,
            self.false_unreachable,
            self.detections.len(),
            self.missed,
            self.wedges,
            q(0.5),
            q(1.0),
            self.resets,
            self.connections,
            self.forwarded
        )
    }
}

/// Runs a soak.
pub async fn run(bins: &Binaries, s: SoakSettings) -> anyhow::Result<SoakReport> {
    let fleet = FaultyFleet::start(bins, s.clusters, s.interval, s.grace).await?;
    let faulty = |drop| Faults::jittery(s.delay, s.delay, drop);
    for p in fleet.proxies() {
        p.set(Direction::ToUpstream, faulty(s.drop));
        p.set(Direction::ToClient, faulty(0.0));
    }
    let grace = Duration::from_secs(s.grace.into());
    let start = Instant::now();
    let mut report = SoakReport {
        clusters: s.clusters,
        ..SoakReport::default()
    };
    let mut injected = 0usize;
    let mut next_blackhole = start + s.blackhole_every;
    let mut next_wedge = s.wedge_every.map(|every| start + every);
    while start.elapsed() < s.duration {
        if let Some(at) = next_wedge
            && Instant::now() >= at
        {
            let victim = rand::thread_rng().gen_range(0..s.clusters);
            fleet.proxy(victim).wedge_open_connections();
            report.wedges += 1;
            next_wedge = s.wedge_every.map(|every| Instant::now() + every);
        }
        if Instant::now() >= next_blackhole {
            let victim = rand::thread_rng().gen_range(0..s.clusters);
            let blackholed = Instant::now();
            fleet.proxy(victim).set_both(Faults::blackhole());
            injected += 1;
            let detected = wait_for_status(
                &fleet,
                victim,
                Status::False,
                grace * 2 + Duration::from_secs(10),
            )
            .await;
            match detected {
                Some(()) => report.detections.push(blackholed.elapsed().as_secs_f64()),
                None => report.missed += 1,
            }
            fleet
                .proxy(victim)
                .set(Direction::ToUpstream, faulty(s.drop));
            fleet.proxy(victim).set(Direction::ToClient, faulty(0.0));
            wait_for_status(&fleet, victim, Status::True, Duration::from_secs(60)).await;
            next_blackhole = Instant::now() + s.blackhole_every;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    report.seconds = start.elapsed().as_secs_f64();
    report.false_unreachable = fleet
        .unreachable_verdicts()
        .saturating_sub(injected - report.missed);
    report.detections.sort_by(f64::total_cmp);
    for p in fleet.proxies() {
        let c = p.counters();
        report.resets += c.resets.load(std::sync::atomic::Ordering::Relaxed);
        report.connections += c.connections.load(std::sync::atomic::Ordering::Relaxed);
        report.forwarded += c.forwarded.load(std::sync::atomic::Ordering::Relaxed);
    }
    Ok(report)
}

/// Waits up to `timeout` for cluster `i`'s Reachable condition to be `status`.
pub async fn wait_for_status(
    fleet: &FaultyFleet,
    i: usize,
    status: Status,
    timeout: Duration,
) -> Option<()> {
    crate::wait::until_some("the cluster's Reachable condition", timeout, || async {
        fleet
            .reachable_all()
            .await
            .is_some_and(|r| r[i].status == status)
            .then_some(())
    })
    .await
    .ok()
    .map(|_| ())
}

//! Real agents instead of simulated ones (`loadgen --real-agents N`): N `fleetpulse-agent
//! run` processes, each with its own generated key listed in the MemberCluster manifests
//! the hub loads, each serving `/metrics` on a loopback port. Once every agent has had
//! `--warmup-rounds` heartbeats accepted, the hostile clients (if asked for) start and the
//! window of `--duration-seconds` begins. The agents' own round-trip histograms
//! (`fleetpulse_agent_heartbeat_duration_seconds`, scraped at both ends of the window and
//! differenced) are merged, so the quantiles are bucket upper bounds. The hub's count of
//! accepted heartbeats and each cluster's Reachable condition are read from its admin
//! listener, its log growth from its log file.

mod agents;

use std::fmt;
use std::time::{Duration, Instant, SystemTime};

use fleetpulse_agent::report::{incarnation_at, unix_seconds};
use fleetpulse_common::api::MemberCluster;
use fleetpulse_common::api::condition::{REACHABLE, Status};
use fleetpulse_common::protocol::keys;

use super::client::{self, Transport};
use super::histogram::{self, Buckets};
use super::{Args, hostile, hub, reports};
use crate::fleet;
use agents::Agents;

/// The figures of a real-agent run; its [`Display`](fmt::Display) is the last line.
#[derive(Debug)]
pub struct RealRun {
    /// Agent processes started.
    pub agents: usize,
    /// Heartbeat attempts the agents sent in the window.
    pub sent: u64,
    /// Attempts that failed (any reason), by the agents' count.
    pub failed: u64,
    /// Heartbeats the hub counted as accepted in the window (`None`: its metrics did not
    /// answer).
    pub hub_accepted: Option<u64>,
    /// Clusters Reachable on the hub at the end.
    pub reachable: usize,
    /// The agents' round trips in the window, merged.
    pub round_trips: Buckets,
    /// How fast the hub's log grew in the window (`None`: a hub at --url).
    pub log_bytes_per_minute: Option<f64>,
}

impl RealRun {
    /// What went wrong, if anything: a failed attempt, a cluster not Reachable, or no round
    /// trip measured at all.
    pub fn problem(&self) -> Option<String> {
        if self.round_trips.count() == 0 {
            Some("the agents measured no heartbeat round trip in the window".into())
        } else if self.failed > 0 {
            Some(format!("{} heartbeat attempts failed", self.failed))
        } else if self.reachable < self.agents {
            Some(format!(
                "only {} of {} clusters were Reachable at the end",
                self.reachable, self.agents
            ))
        } else {
            None
        }
    }
}

impl fmt::Display for RealRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let q = |q| histogram::ms(self.round_trips.quantile_bound(q));
        write!(
            f,
            "real_agents={} sent={} failed={} hub_accepted={} reachable={} round_trips={} \
             p50_le_ms={} p99_le_ms={} hub_log_bytes_per_minute={}",
            self.agents,
            self.sent,
            self.failed,
            self.hub_accepted.map_or("nan".into(), |n| n.to_string()),
            self.reachable,
            self.round_trips.count(),
            q(0.5),
            q(0.99),
            self.log_bytes_per_minute
                .map_or("nan".into(), |b| format!("{b:.0}")),
        )
    }
}

/// Runs `n` real agents against the hub for the window and prints the figures, the
/// [`RealRun`] last.
pub async fn run(args: &Args, n: usize) -> anyhow::Result<RealRun> {
    let work = tempfile::tempdir()?;
    let manifests = args
        .manifests_dir
        .clone()
        .unwrap_or_else(|| work.path().join("manifests"));
    let interval = args.interval_seconds;
    let clusters = fleet::write_clusters(&manifests, n, interval, interval.saturating_mul(4))?;
    let mut hub = super::hub_under_test(args, &manifests, work.path())?;
    let admin = client::client(&hub.ca_pem, Transport::Http2)?;
    let public_keys = clusters
        .iter()
        .map(|c| keys::public_key_string(&c.key.verifying_key()))
        .collect();
    let timeout = Duration::from_secs(args.startup_timeout_seconds);
    hub.wait_ready(&admin, &public_keys, timeout).await?;
    let bin = hub::binary_beside("fleetpulse-agent", args.agent_bin.as_deref(), "--agent-bin")?;
    let mut agents = Agents::start(&bin, &clusters, &hub, &args.audience, interval, work.path())?;
    println!(
        "real agents: {n} `{} run` processes at a {interval}s interval, hub {}",
        bin.display(),
        hub.url
    );
    let warm_up = Duration::from_secs(60 + u64::from(interval) * (args.warmup_rounds as u64 + 2));
    let took = agents.warm_up(args.warmup_rounds as u64, warm_up).await?;
    println!(
        "warm-up: every agent had {} heartbeats accepted after {:.1}s",
        args.warmup_rounds,
        took.as_secs_f64()
    );

    // One of the fleet's reports, for the bad-signature bursts to spoil.
    let now = SystemTime::now();
    let plan = reports::ReportPlan {
        audience: args.audience.clone(),
        interval_secs: interval,
        rounds: 1,
        checks: args.checks,
        start_unix: unix_seconds(now),
        incarnation: incarnation_at(now),
    };
    let victim = reports::presign(&clusters[..1], &plan).remove(0);
    let hostile = hostile::Hostile::of(args, &hub.url, &hub.ca_pem, &victim);
    let ticks = hub::ticks_per_second();
    let hub_cpu = || hub.pid.and_then(|pid| hub::sample(pid, ticks).ok());
    let window = Duration::from_secs(
        args.duration_seconds.div_ceil(u64::from(interval)).max(1) * u64::from(interval),
    );

    let before = agents.scrape().await?;
    let hub_before = (hub_accepted(&admin, &hub.admin_url).await, hub_cpu());
    let log_size = || {
        hub.log
            .as_deref()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
    };
    let log_before = log_size();
    let attack = hostile::Attack::start(hostile, hub.log.as_deref())?;
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let after = agents.scrape().await?;
    let hub_after = (hub_accepted(&admin, &hub.admin_url).await, hub_cpu());
    let elapsed = started.elapsed();
    attack.finish(elapsed);
    let log_after = log_size();
    let reachable = reachable(&admin, &hub.admin_url, &clusters).await;
    agents.stop();
    hub.stop();

    let secs = elapsed.as_secs_f64();
    let run = RealRun {
        agents: n,
        sent: after.sent - before.sent,
        failed: after.failed - before.failed,
        hub_accepted: match (hub_before.0, hub_after.0) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        },
        reachable,
        round_trips: after.buckets.since(&before.buckets),
        log_bytes_per_minute: log_before
            .zip(log_after)
            .map(|(a, b)| b.saturating_sub(a) as f64 * 60.0 / secs),
    };
    let hub_cpu_s = match (hub_before.1, hub_after.1) {
        (Some(a), Some(b)) => format!("{:.2}", b.cpu_secs - a.cpu_secs),
        _ => "nan".into(),
    };
    println!(
        "window {secs:.1}s: sent={} failed={} (the agents' counters); the hub accepted {} \
         (fleetpulse_hub_heartbeats_total), cpu_s={hub_cpu_s}; agents' cpu_s={:.2}; {}/{n} \
         clusters Reachable at the end",
        run.sent,
        run.failed,
        run.hub_accepted.map_or("nan".into(), |a| a.to_string()),
        after.cpu_secs - before.cpu_secs,
        run.reachable,
    );
    let q = |q| histogram::ms(run.round_trips.quantile_bound(q));
    println!(
        "round trips (every attempt, from the {n} agents' \
         fleetpulse_agent_heartbeat_duration_seconds, merged; each quantile is the upper bound \
         of the bucket it falls in): count={} p50_le_ms={} p90_le_ms={} p99_le_ms={} max_le_ms={}",
        run.round_trips.count(),
        q(0.5),
        q(0.9),
        q(0.99),
        q(1.0)
    );
    println!(
        "round trip buckets (le_ms:count): {}",
        run.round_trips.per_bucket_ms()
    );
    println!("{run}");
    Ok(run)
}

/// The hub's count of accepted heartbeats, from its admin listener's `/metrics`.
async fn hub_accepted(client: &reqwest::Client, admin: &reqwest::Url) -> Option<u64> {
    let text = hub::scrape_metrics(client, admin).await?;
    let name = "fleetpulse_hub_heartbeats_total";
    Some(histogram::counter(&text, name, "result=\"accepted\""))
}

/// How many of `clusters` the hub shows Reachable (0 when its read API does not answer).
async fn reachable(
    client: &reqwest::Client,
    admin: &reqwest::Url,
    clusters: &[fleet::SimCluster],
) -> usize {
    let Ok(url) = admin.join("/v1/memberclusters?namespace=fleet") else {
        return 0;
    };
    let Ok(response) = client.get(url).send().await else {
        return 0;
    };
    let Ok(list) = response.json::<serde_json::Value>().await else {
        return 0;
    };
    let items: Vec<MemberCluster> =
        serde_json::from_value(list["items"].clone()).unwrap_or_default();
    clusters
        .iter()
        .filter(|c| fleet::condition_of(&items, &c.id, REACHABLE) == Status::True)
        .count()
}

//! `write-amplification`: how many Kubernetes API writes the hub makes for a fleet over a
//! simulated hour, compared with lease-based heartbeats (Karmada's pull agents renew a
//! lease every 10 s, Open Cluster Management's every 60 s). See docs/performance.md.

use std::time::Duration;

use clap::Parser;

use fleetpulse_tests::write_amplification::{self, Plan};

/// Counts the hub's management-API writes for a simulated fleet and hour.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// MemberClusters in the fleet.
    #[arg(long, default_value_t = 1000)]
    clusters: usize,
    /// Simulated minutes.
    #[arg(long, default_value_t = 60)]
    minutes: u64,
    /// Heartbeat interval, seconds.
    #[arg(long, default_value_t = 10)]
    interval: u64,
    /// Grace period, seconds.
    #[arg(long, default_value_t = 40)]
    grace: u64,
    /// The hub's --status-refresh-seconds (0: off).
    #[arg(long, default_value_t = 300)]
    status_refresh: u64,
    /// Outages per cluster per hour (a realistic fleet: a few percent of clusters a day
    /// lose their agent or network for a while).
    #[arg(long, default_value_t = 0.02)]
    outages_per_cluster_hour: f64,
    /// Seconds each outage lasts.
    #[arg(long, default_value_t = 120)]
    outage_seconds: u64,
    /// ClusterSets (maxReplicas 3), each over its own slice of the fleet.
    #[arg(long, default_value_t = 10)]
    cluster_sets: usize,
    /// Simulated seconds of the fleet's first reports, counted apart (one-off writes).
    #[arg(long, default_value_t = 120)]
    warmup_seconds: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    anyhow::ensure!(
        a.interval > 0 && a.minutes > 0,
        "--interval and --minutes must be positive"
    );
    let plan = Plan {
        clusters: a.clusters,
        duration: Duration::from_secs(a.minutes * 60),
        interval: Duration::from_secs(a.interval),
        grace: Duration::from_secs(a.grace),
        status_refresh: Duration::from_secs(a.status_refresh),
        outages_per_cluster_hour: a.outages_per_cluster_hour,
        outage: Duration::from_secs(a.outage_seconds),
        cluster_sets: a.cluster_sets,
        warmup: Duration::from_secs(a.warmup_seconds),
    };
    let started = std::time::Instant::now();
    let c = write_amplification::run(&plan).await?;
    let hours = a.minutes as f64 / 60.0;
    let per_cluster_hour = |writes: u64| writes as f64 / a.clusters as f64 / hours;
    let refresh = c.cluster_status - c.transition_status;
    let caused = c.total - refresh - c.hub_state;
    println!(
        "simulated {hours:.1} h of {} clusters at {} s heartbeats in {:.1} s: {} heartbeats, {} outages of {} s",
        a.clusters,
        a.interval,
        started.elapsed().as_secs_f64(),
        c.heartbeats,
        c.outages,
        a.outage_seconds
    );
    println!(
        "warm-up ({} s: every cluster's first conditions, the first selections; once per fleet): {} writes",
        a.warmup_seconds, c.warmup
    );
    println!(
        "after the warm-up: memberclusters/status {} ({} refresh, {} transitions), clustersets/status {}, membership labels {}, events {}; total {}",
        c.cluster_status, refresh, c.transition_status, c.set_status, c.labels, c.events, c.total
    );
    println!(
        "hub state: {} writes in {} flushes ({:.0} per hour; ConfigMaps of about {} clusters each)",
        c.hub_state,
        c.flushes,
        c.hub_state as f64 / hours,
        fleetpulse_hub::kubernetes::store::hub_state::CLUSTERS_PER_SHARD
    );
    println!(
        "refresh: {:.2} writes per cluster per hour (budget 12: one per 5 min); transitions: {caused} writes for {} outages ({:.1} per outage, status + labels + events)",
        per_cluster_hour(refresh),
        c.outages,
        caused as f64 / c.outages.max(1) as f64
    );
    println!(
        "clusters={} writes_per_cluster_hour={:.2} refresh_per_cluster_hour={:.2} karmada_10s_lease=360 ocm_60s_lease=60 vs_karmada={:.4} vs_ocm={:.4}",
        a.clusters,
        per_cluster_hour(c.total),
        per_cluster_hour(refresh),
        per_cluster_hour(c.total) / 360.0,
        per_cluster_hour(c.total) / 60.0
    );
    Ok(())
}

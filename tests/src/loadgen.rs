//! The load generator behind the `loadgen` binary: many simulated agents (distinct Ed25519
//! keys, registered through generated MemberCluster manifests) send signed heartbeats at
//! an interval to a real `fleetpulse-hub`, and the run reports what the hub spent on them
//! against what one core spends on signature verification alone.
//!
//! - [`reports`]: every report built and signed the agent's way, before the timed phase.
//! - [`client`]: shared HTTP/2 or HTTP/1.1 clients, or a new connection per heartbeat.
//! - [`hub`]: the hub process (started here, or at `--url`) and its `/proc` figures.
//! - [`drive`]: sending on schedule and counting outcomes.
//! - [`verify`]: the single-core `verify_strict` rate, measured in the same run.
//! - [`stats`]: tallies, percentiles and the machine-readable last line.
//! - [`allocs`]: heap allocations per heartbeat, counted on a second hub run in this
//!   process.
//! - [`agent`]: the agent's own footprint (`--agent-footprint`), idle and with a check.
//! - [`hostile`]: slow connections and bad-signature bursts beside the fleet
//!   (`--slow-connections`, `--bad-signature-burst`), with the hub's log growth.
//! - [`real_agents`]: real `fleetpulse-agent run` processes instead of simulated agents
//!   (`--real-agents`), their heartbeat round trips read from their own histograms
//!   ([`histogram`]).
//! - [`replicas`]: hub replicas sharing the fleet (`--replicas 1,2,3`), each count in
//!   turn, heartbeats sent to each cluster's shard owner.
//!
//! docs/performance.md describes the method and the figures.

pub mod agent;
pub mod allocs;
pub mod client;
pub mod drive;
pub mod histogram;
pub mod hostile;
pub mod hub;
pub mod real_agents;
pub mod replicas;
pub mod reports;
pub mod stack;
pub mod stats;
pub mod verify;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use clap::Parser;

use fleetpulse_agent::report::{incarnation_at, unix_seconds};
use fleetpulse_common::protocol::keys;

use crate::fleet;
use client::Transport;
use hub::HubUnderTest;
use stats::FinalLine;

/// Simulate a fleet of agents sending signed heartbeats to a fleetpulse hub, and measure
/// the hub's CPU time per accepted heartbeat against one core's signature-verification rate.
#[derive(Debug, Clone, Parser)]
#[command(name = "loadgen", about)]
pub struct Args {
    /// Simulated clusters (agents), each with its own key.
    #[arg(long, env = "LOADGEN_CLUSTERS", default_value_t = 1000)]
    pub clusters: usize,
    /// Heartbeat interval of every agent, in seconds.
    #[arg(long, env = "LOADGEN_INTERVAL_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub interval_seconds: u32,
    /// Length of the timed phase, in seconds (rounded up to whole intervals; a multiple of
    /// 10 s covers the hub's periodic position flush evenly).
    #[arg(long, env = "LOADGEN_DURATION_SECONDS", default_value_t = 60)]
    pub duration_seconds: u64,
    /// Rounds sent before the timed phase (a cluster's first reports change its conditions).
    #[arg(long, env = "LOADGEN_WARMUP_ROUNDS", default_value_t = 2)]
    pub warmup_rounds: usize,
    /// Check results in every report (the first two are the built-ins, then Lua checks).
    #[arg(long, env = "LOADGEN_CHECKS", default_value_t = 4)]
    pub checks: usize,
    /// How the fleet connects.
    #[arg(long, env = "LOADGEN_TRANSPORT", value_enum, default_value_t = Transport::Http2)]
    pub transport: Transport,
    /// Independent HTTP clients the agents are spread over (with http2, one connection
    /// each: like a load balancer's few upstream connections).
    #[arg(long, env = "LOADGEN_CONNECTIONS", default_value_t = 4)]
    pub connections: usize,
    /// Most heartbeats in flight at once.
    #[arg(long, env = "LOADGEN_MAX_IN_FLIGHT", default_value_t = 1024)]
    pub max_in_flight: usize,
    /// How long to measure the single-core verification rate, in seconds.
    #[arg(long, env = "LOADGEN_VERIFY_SECONDS", default_value_t = 3.0)]
    pub verify_seconds: f64,
    /// The hub's audience.
    #[arg(long, env = "LOADGEN_AUDIENCE", default_value = "fleetpulse")]
    pub audience: String,
    /// Use a running hub at this URL instead of starting one (needs --ca and
    /// --manifests-dir; the hub must watch that directory).
    #[arg(long, env = "LOADGEN_URL", requires_all = ["ca", "manifests_dir"])]
    pub url: Option<reqwest::Url>,
    /// The admin listener of the hub at --url (its read API, to see the clusters loaded);
    /// the hub's default loopback admin port when not given.
    #[arg(
        long,
        env = "LOADGEN_ADMIN_URL",
        default_value = "https://localhost:9443"
    )]
    pub admin_url: reqwest::Url,
    /// CA certificate (PEM) of the hub at --url.
    #[arg(long, env = "LOADGEN_CA")]
    pub ca: Option<PathBuf>,
    /// Process id of the hub at --url, for its CPU time and memory.
    #[arg(long, env = "LOADGEN_HUB_PID")]
    pub hub_pid: Option<u32>,
    /// Where to write the clusters' manifests (default: a temporary directory).
    #[arg(long, env = "LOADGEN_MANIFESTS_DIR")]
    pub manifests_dir: Option<PathBuf>,
    /// The `fleetpulse-hub` binary (default: next to this one).
    #[arg(long, env = "LOADGEN_HUB_BIN")]
    pub hub_bin: Option<PathBuf>,
    /// Send `GET /healthz` on the same schedule instead of heartbeats, to measure what the
    /// hub spends on an HTTPS request that does nothing (the transport floor).
    #[arg(long, env = "LOADGEN_FLOOR")]
    pub floor: bool,
    /// Instead of the load: measure one real agent's RSS and CPU, idle and with a Lua check
    /// over this many Pods in its (simulated) cluster; needs `fleetpulse-agent` built next
    /// to `fleetpulse-hub`.
    #[arg(long, env = "LOADGEN_AGENT_FOOTPRINT", value_name = "PODS")]
    pub agent_footprint: Option<usize>,
    /// Seconds each agent-footprint phase is measured.
    #[arg(long, env = "LOADGEN_AGENT_SECONDS", default_value_t = 60)]
    pub agent_seconds: u64,
    /// Run the hub on these CPUs only (a `taskset` list such as `1`), so that it does not
    /// share cores with the load generator; needs util-linux's `taskset`.
    #[arg(long, env = "LOADGEN_HUB_CPUS", value_name = "LIST")]
    pub hub_cpus: Option<String>,
    /// A mirror every cluster gets on the hub started here (its `serve --mirror-default`,
    /// e.g. `sveltoscluster`; without a mirror kubeconfig the hub only shows what it would
    /// write), so the mirror feed has every cluster to follow. Repeatable.
    #[arg(long, value_name = "KIND")]
    pub mirror_default: Vec<String>,
    /// Run the load generator itself on these CPUs only (a `taskset` list such as `0`).
    #[arg(long, env = "LOADGEN_CPUS", value_name = "LIST")]
    pub loadgen_cpus: Option<String>,
    /// Hold this many slow connections open beside the fleet (idle, slow headers, slow
    /// body; reopened when the hub closes them) and report the hub's log growth.
    #[arg(long, env = "LOADGEN_SLOW_CONNECTIONS", default_value_t = 0)]
    pub slow_connections: usize,
    /// Send bursts of this many reports with a spoiled signature beside the fleet.
    #[arg(long, env = "LOADGEN_BAD_SIGNATURE_BURST", default_value_t = 0)]
    pub bad_signature_burst: usize,
    /// Seconds between the starts of two bad-signature bursts.
    #[arg(long, env = "LOADGEN_BAD_SIGNATURE_EVERY_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub bad_signature_every_seconds: u64,
    /// The loopback address the bad-signature bursts come from. The fleet's is
    /// 127.0.0.1; the hub limits authentication failures per source (`serve
    /// --failure-limit`), so from 127.0.0.1 the bursts would cut the fleet off too.
    #[arg(long, env = "LOADGEN_BAD_SIGNATURE_FROM", default_value = "127.0.0.2")]
    pub bad_signature_from: std::net::Ipv4Addr,
    /// Instead of simulated agents: start this many real `fleetpulse-agent run` processes,
    /// each with its own key and its metrics on a loopback port, at --interval-seconds for
    /// --duration-seconds after --warmup-rounds accepted heartbeats each; the hostile
    /// clients run beside them as usual. Reports the round trips the agents measured
    /// (`fleetpulse_agent_heartbeat_duration_seconds`). The simulated fleet's flags
    /// (--clusters, --transport, --connections, --floor, ...) do not apply.
    #[arg(long, env = "LOADGEN_REAL_AGENTS", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=500),
          conflicts_with_all = ["clusters", "floor", "agent_footprint"])]
    pub real_agents: Option<u32>,
    /// The `fleetpulse-agent` binary for --real-agents (default: next to this one).
    #[arg(long, env = "LOADGEN_AGENT_BIN")]
    pub agent_bin: Option<PathBuf>,
    /// Count the hub's heap allocations per heartbeat (`allocs_per_hb`) on a second hub
    /// run inside this process before the load (a fleet of at most 1,000 clusters, 5 s).
    #[arg(long, env = "LOADGEN_COUNT_ALLOCATIONS", default_value_t = true, action = clap::ArgAction::Set)]
    pub count_allocations: bool,
    /// Run the fleet against hub replicas sharing it (Kubernetes mode on a simulated
    /// management cluster, 12 shards), once per count in the list, e.g. `1,2,3`: each
    /// replica's CPU per heartbeat and memory, against the first count's.
    #[arg(long, env = "LOADGEN_REPLICAS", value_delimiter = ',', value_name = "COUNTS",
          value_parser = clap::value_parser!(u32).range(1..=12))]
    pub replicas: Vec<u32>,
    /// With --replicas: after each run of two replicas or more, run again with every
    /// heartbeat posted to a replica that does not own its cluster's shard, following its
    /// redirect: what a redirect costs per heartbeat (an agent that kept no owner).
    #[arg(long, env = "LOADGEN_REPLICAS_MISROUTED", requires = "replicas")]
    pub replicas_misrouted: bool,
    /// Heartbeat phases, each alternating with a floor phase (`GET /healthz` on the same
    /// schedule and connections) and a measurement of one signature in a batch of 32, for
    /// the last line's `floor_us`, `batch_sig_us`, `hb_us` and `stack_ratio` (0: none). The
    /// first heartbeat phase is the run's timed phase; each further one adds its rounds.
    #[arg(long, env = "LOADGEN_STACK_SITTINGS", default_value_t = 2)]
    pub stack_sittings: usize,
    /// How long the hub may take to start and load every cluster, in seconds.
    #[arg(long, env = "LOADGEN_STARTUP_TIMEOUT_SECONDS", default_value_t = 600)]
    pub startup_timeout_seconds: u64,
}

/// The result of a run.
#[derive(Debug)]
pub struct Run {
    /// The figures of the last line.
    pub line: FinalLine,
    /// Heartbeats refused by the hub (warm-up and timed).
    pub rejected: u64,
    /// Heartbeats without an answer (warm-up and timed).
    pub failed: u64,
}

/// Measures one agent's footprint (`--agent-footprint`) and prints it.
pub async fn run_agent_footprint(args: &Args, pods: usize) -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let bin = hub::hub_binary(args.hub_bin.as_deref())?;
    let seconds = args.agent_seconds;
    agent::footprint(pods, args.interval_seconds, seconds, work.path(), &bin).await
}

/// The hub `args` name (`--url`), or one started in `work` watching `manifests`.
pub fn hub_under_test(
    args: &Args,
    manifests: &std::path::Path,
    work: &std::path::Path,
) -> anyhow::Result<HubUnderTest> {
    match (&args.url, &args.ca) {
        (Some(url), Some(ca)) => {
            HubUnderTest::external(url.clone(), args.admin_url.clone(), ca, args.hub_pid)
        }
        _ => {
            let bin = hub::hub_binary(args.hub_bin.as_deref())?;
            let extra: Vec<String> = (args.mirror_default.iter())
                .flat_map(|kind| ["--mirror-default".to_owned(), kind.clone()])
                .collect();
            let cpus = args.hub_cpus.as_deref();
            HubUnderTest::start_embedded(&bin, manifests, work, cpus, &extra)
        }
    }
}

/// Runs the load and prints its figures to stdout, the [`FinalLine`] last; `count` counts
/// the calling thread's heap allocations (the binary's allocator), for `allocs_per_hb`.
pub async fn run(args: Args, count: Option<allocs::CountAllocations>) -> anyhow::Result<Run> {
    if let Some(cpus) = &args.loadgen_cpus {
        hub::pin_process(std::process::id(), cpus)?;
    }
    let allocations = match count {
        Some(count) if args.count_allocations && !args.floor => {
            let clusters = args.clusters.min(allocs::MAX_CLUSTERS);
            let counted = allocs::per_heartbeat(
                count,
                clusters,
                args.transport,
                args.connections,
                &args.audience,
            )
            .await?;
            println!(
                "allocations: {:.1} per heartbeat on the hub's runtime thread ({} heartbeats \
                 from {clusters} clusters to a hub in this process)",
                counted.per_heartbeat, counted.heartbeats
            );
            Some(counted)
        }
        _ => None,
    };
    let work = tempfile::tempdir()?;
    let manifests = args
        .manifests_dir
        .clone()
        .unwrap_or_else(|| work.path().join("manifests"));
    let t = Instant::now();
    let grace = args.interval_seconds.saturating_mul(4);
    let clusters = fleet::write_clusters(&manifests, args.clusters, args.interval_seconds, grace)?;
    println!(
        "fleet: {} clusters, keys and manifests in {:.1}s",
        clusters.len(),
        t.elapsed().as_secs_f64()
    );
    let mut hub = hub_under_test(&args, &manifests, work.path())?;
    let setup = client::client(&hub.ca_pem, Transport::Http2)?;
    let public_keys: HashSet<String> = clusters
        .iter()
        .map(|c| keys::public_key_string(&c.key.verifying_key()))
        .collect();
    let timeout = Duration::from_secs(args.startup_timeout_seconds);
    let startup = hub.wait_ready(&setup, &public_keys, timeout).await?;
    let ticks = hub::ticks_per_second();
    let probe = || hub.pid.and_then(|pid| hub::sample(pid, ticks).ok());
    let idle = probe();
    println!(
        "hub: {} pid={} ready with {} clusters after {:.1}s, rss_idle_mib={}",
        hub.url,
        hub.pid.map_or("unknown".into(), |p| p.to_string()),
        clusters.len(),
        startup.as_secs_f64(),
        idle.map_or("nan".into(), |s| format!(
            "{:.1}",
            s.rss_kib as f64 / 1024.0
        )),
    );

    let interval = u64::from(args.interval_seconds);
    let timed_rounds = args.duration_seconds.div_ceil(interval).max(1) as usize;
    let now = SystemTime::now();
    let plan = reports::ReportPlan {
        audience: args.audience.clone(),
        interval_secs: args.interval_seconds,
        rounds: args.warmup_rounds + timed_rounds * sittings(&args).max(1),
        checks: args.checks,
        start_unix: unix_seconds(now),
        incarnation: incarnation_at(now),
    };
    let t = Instant::now();
    let agents = tokio::task::block_in_place(|| reports::presign(&clusters, &plan));
    let sample = &agents[0].reports[0];
    println!(
        "presigned: {} reports in {:.1}s on the client (not measured); a report's JWS is {} bytes",
        agents.len() * plan.rounds,
        t.elapsed().as_secs_f64(),
        sample.len()
    );
    let input = verify::signing_input(sample)?.to_owned();
    let key = clusters[0].key.clone();
    let wall = Duration::from_secs_f64(args.verify_seconds.max(0.0));
    let verify =
        tokio::task::spawn_blocking(move || verify::verify_only(&key, input.as_bytes(), wall))
            .await??;
    println!(
        "verify_only: {:.0} verify_strict/s on one core ({} verifications, median of 250 ms \
         slices of the thread's CPU time)",
        verify.per_core, verify.iterations
    );

    let clients = client::clients(&hub.ca_pem, args.transport, args.connections)?;
    let schedule = drive::Schedule {
        interval: Duration::from_secs(interval),
        warmup_rounds: args.warmup_rounds,
        rounds: args.warmup_rounds + timed_rounds,
        max_in_flight: args.max_in_flight.max(1),
        floor: args.floor,
        offset: 0,
    };
    println!(
        "load: {} transport={} clients={} interval={}s warmup_rounds={} timed_rounds={timed_rounds} \
         hub_cpus={} loadgen_cpus={}",
        if args.floor {
            "GET /healthz (floor)"
        } else {
            "heartbeats"
        },
        args.transport.as_str(),
        clients.len(),
        interval,
        args.warmup_rounds,
        args.hub_cpus.as_deref().unwrap_or("any"),
        args.loadgen_cpus.as_deref().unwrap_or("any"),
    );
    let hostile = hostile::Hostile::of(&args, &hub.url, &hub.ca_pem, &agents[0]);
    let attack = hostile::Attack::start(hostile, hub.log.as_deref())?;
    let (urls, healthz) = (drive::urls(&agents, &hub.url)?, hub.url.join("/healthz")?);
    let mut driven = drive::drive(&agents, &clients, &urls, &healthz, schedule, &probe).await?;
    attack.finish(driven.elapsed + schedule.interval * args.warmup_rounds as u32);
    let phases = stack::Phases {
        agents: &agents,
        clients: &clients,
        urls: &urls,
        healthz: &healthz,
        keys: &clusters.iter().map(|c| c.key.clone()).collect::<Vec<_>>(),
        probe: &probe,
        hub_cpus: args.hub_cpus.as_deref(),
    };
    let timed = stack::Timed {
        schedule,
        rounds: timed_rounds,
        first: &driven,
    };
    let stack = match sittings(&args) {
        0 => (stats::Stack::UNMEASURED, stack::Refused::default()),
        n => stack::measure(&phases, timed, n).await?,
    };
    let end = probe();
    if !args.floor {
        print_hub_metrics(&setup, &hub.admin_url, idle.zip(end)).await;
    }
    hub.stop();
    let allocs_per_hb = allocations.map(|a| a.per_heartbeat);
    Ok(stats::summarize(
        &args,
        &mut driven,
        verify.per_core,
        allocs_per_hb,
        end,
        stack,
    ))
}

/// The stack's sittings the run measures: none for a floor run.
fn sittings(args: &Args) -> usize {
    if args.floor { 0 } else { args.stack_sittings }
}

/// From the hub's `/metrics`, over the whole run (warm-up included): how it batched the
/// signatures (nothing when batching is off), and what the mirror feed read and its share
/// of the hub's CPU time between `cpu` (ready, end); nothing when the scrape fails.
async fn print_hub_metrics(
    client: &reqwest::Client,
    admin: &reqwest::Url,
    cpu: Option<(hub::ProcSample, hub::ProcSample)>,
) {
    let Some(text) = hub::scrape_metrics(client, admin).await else {
        return;
    };
    let syncs = histogram::counter(&text, "fleetpulse_hub_mirror_feed_syncs_total", "");
    let read = histogram::counter(&text, "fleetpulse_hub_mirror_feed_clusters_read_total", "");
    let seconds = histogram::value(&text, "fleetpulse_hub_mirror_feed_seconds_total");
    let hub_cpu = cpu.map(|(ready, end)| end.cpu_secs - ready.cpu_secs);
    let share = match (seconds, hub_cpu) {
        (Some(s), Some(c)) if c > 0.0 => format!("{:.2} %", 100.0 * s / c),
        _ => "nan".into(),
    };
    println!(
        "mirror feed: {syncs} syncs read {read} clusters ({:.1} a sync) in {:.3} s, feed_share={share} of the hub's CPU since it was ready (the whole run, warm-up included)",
        read as f64 / syncs.max(1) as f64,
        seconds.unwrap_or(f64::NAN),
    );
    let batches = histogram::counter(&text, "fleetpulse_hub_signature_batches_total", "");
    let signatures = histogram::counter(&text, "fleetpulse_hub_batched_signatures_total", "");
    let batch_cpu = histogram::value(&text, "fleetpulse_hub_signature_batch_cpu_seconds_total");
    if batches > 0 {
        println!(
            "signature batches: {signatures} signatures in {batches} batches, {:.1} a batch, \
             hub_sig_us={:.2} (by the verifying thread's CPU clock; the whole run, warm-up \
             included)",
            signatures as f64 / batches as f64,
            batch_cpu.unwrap_or(f64::NAN) * 1e6 / signatures.max(1) as f64,
        );
    }
}

//! `loadgen --replicas 1,2,3`: the hub as replicas sharing the fleet (real
//! `fleetpulse-hub serve --kube --shards` processes on a simulated management cluster
//! served from this process), one run per replica count in the same sitting. Each
//! heartbeat goes straight to its shard's owner, as an agent does once it has followed
//! one redirect, so what is measured is the steady state. Per run it prints every
//! replica's CPU per heartbeat and memory, and the sum; the first count is the baseline
//! the others are compared with. With `--replicas-misrouted`, each count of two or more
//! runs again with every heartbeat posted to a replica that does not own its shard and
//! its redirect followed: the cost of a redirect, on every heartbeat.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use ed25519_dalek::SigningKey;

use kube::api::{Api, DeleteParams};

use fleetpulse_agent::report::{incarnation_at, unix_seconds};
use fleetpulse_common::api::ClusterSet;
use fleetpulse_common::protocol::keys;
use fleetpulse_hub::ids::shard_of;

use super::hub::{HubUnderTest, ProcSample, sample, ticks_per_second};
use super::{Args, client, drive, reports};
use crate::fleet::{self, SimCluster};
use crate::kube_fleet::{CLUSTER_SET, FleetSpec, KubeFleet, objects};

/// Shards of the runs: enough for three replicas to hold four each.
const SHARDS: u32 = 12;

/// What one run with `replicas` replicas measured.
struct Measured {
    replicas: usize,
    misrouted: bool,
    accepted_per_s: f64,
    /// CPU of every replica together per accepted heartbeat, in microseconds.
    cpu_us_per_hb: f64,
    /// Each replica's identity, clusters owned, CPU per heartbeat it accepted (µs), RSS (MiB).
    each: Vec<(String, usize, f64, f64)>,
    p50_ms: f64,
    p99_ms: f64,
    refused: u64,
}

/// Runs the fleet against each count of `counts` replicas in turn and prints the figures.
pub async fn run(args: &Args, counts: &[usize]) -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let grace = args.interval_seconds.saturating_mul(4);
    let clusters = fleet::write_clusters(work.path(), args.clusters, args.interval_seconds, grace)?;
    let mut baseline: Option<f64> = None;
    let mut refused = 0;
    let runs = (counts.iter()).flat_map(|&n| {
        let again = args.replicas_misrouted && n >= 2;
        [(n.max(1), false)]
            .into_iter()
            .chain(again.then_some((n, true)))
    });
    for (n, misrouted) in runs {
        let m = measure(args, &clusters, n, misrouted).await?;
        let route = if m.misrouted { "misrouted" } else { "direct" };
        for (id, owned, cpu_us, rss) in &m.each {
            println!(
                "replica: replicas={} route={route} id={id} clusters={owned} cpu_us_per_hb={cpu_us:.2} rss_mib={rss:.1}",
                m.replicas
            );
        }
        let base = *baseline.get_or_insert(m.cpu_us_per_hb);
        println!(
            "replicas: replicas={} route={route} shards={SHARDS} clusters={} accepted_per_s={:.0} \
             hub_cpu_us_per_hb={:.2} (all replicas) cpu_ratio_to_first={:.2} \
             max_rss_mib={:.1} p50_ms={:.2} p99_ms={:.2} refused={}",
            m.replicas,
            clusters.len(),
            m.accepted_per_s,
            m.cpu_us_per_hb,
            m.cpu_us_per_hb / base,
            (m.each.iter()).map(|e| e.3).fold(0.0, f64::max),
            m.p50_ms,
            m.p99_ms,
            m.refused,
        );
        refused += m.refused;
    }
    anyhow::ensure!(
        refused == 0,
        "{refused} timed heartbeats were refused or got no answer; see the refusals above"
    );
    Ok(())
}

/// One run: a new management cluster and `n` replicas, every cluster registered, the
/// shards balanced, then the warm-up and timed rounds; `misrouted`, each heartbeat to the
/// replica after its owner, which redirects it.
async fn measure(
    args: &Args,
    clusters: &[SimCluster],
    n: usize,
    misrouted: bool,
) -> anyhow::Result<Measured> {
    let spec = FleetSpec {
        members: 0,
        interval_secs: args.interval_seconds,
        grace_secs: args.interval_seconds.saturating_mul(4),
        ..FleetSpec::default()
    };
    let mut fleet = KubeFleet::prepare(spec.clone()).await?;
    // No set, as in the single hub's runs: ingest is what is measured.
    Api::<ClusterSet>::all(fleet.mgmt.client())
        .delete(CLUSTER_SET, &DeleteParams::default())
        .await?;
    let members: Vec<(String, SigningKey)> = (clusters.iter())
        .map(|c| (c.id.name.clone(), c.key.clone()))
        .collect();
    objects::install_members(&fleet.mgmt.client(), &spec, &members, 32).await?;
    let ids: Vec<String> = (0..n).map(|i| format!("hub-{i}")).collect();
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    fleet.start_sharded(&id_refs, SHARDS).await?;
    let holders = fleet
        .wait_balanced(&id_refs, Duration::from_secs(120))
        .await?;

    // Every replica lists every cluster before the load starts.
    let ca = std::fs::read(&fleet.pki.ca_cert)?;
    let setup = client::client(&ca, client::Transport::Http2)?;
    let public_keys: HashSet<String> = (clusters.iter())
        .map(|c| keys::public_key_string(&c.key.verifying_key()))
        .collect();
    let mut replicas = BTreeMap::new();
    for id in &ids {
        let (addr, admin, pid) = (fleet.replica_endpoints(id))
            .ok_or_else(|| anyhow::anyhow!("replica {id} is not running"))?;
        let url: reqwest::Url = format!("https://{addr}").parse()?;
        let admin_url = format!("https://{admin}").parse()?;
        let mut hub =
            HubUnderTest::external(url.clone(), admin_url, &fleet.pki.ca_cert, Some(pid))?;
        let timeout = Duration::from_secs(args.startup_timeout_seconds);
        hub.wait_ready(&setup, &public_keys, timeout).await?;
        replicas.insert(id.clone(), (url, pid));
    }

    let now = SystemTime::now();
    let timed_rounds = (args
        .duration_seconds
        .div_ceil(u64::from(args.interval_seconds)))
    .max(1);
    let plan = reports::ReportPlan {
        audience: args.audience.clone(),
        interval_secs: args.interval_seconds,
        rounds: args.warmup_rounds + timed_rounds as usize,
        checks: args.checks,
        start_unix: unix_seconds(now),
        incarnation: incarnation_at(now),
    };
    let agents = tokio::task::block_in_place(|| reports::presign(clusters, &plan));
    // Each agent posts to its shard's owner; count what each owner takes.
    let mut owned: BTreeMap<&str, usize> = BTreeMap::new();
    let mut urls = Vec::with_capacity(agents.len());
    for (agent, cluster) in agents.iter().zip(clusters) {
        let holder = &holders[&shard_of(&cluster.id, SHARDS)];
        *owned.entry(holder.as_str()).or_default() += 1;
        let at = match misrouted {
            false => holder,
            true => {
                let i = ids.iter().position(|id| id == holder).unwrap_or_default();
                &ids[(i + 1) % n]
            }
        };
        urls.push(replicas[at].0.join(&agent.path)?);
    }
    let healthz = replicas[&ids[0]].0.join("/healthz")?;
    let clients = match misrouted {
        false => client::clients(&ca, args.transport, args.connections)?,
        true => client::clients_following_redirects(&ca, args.transport, args.connections)?,
    };
    let schedule = drive::Schedule {
        interval: Duration::from_secs(u64::from(args.interval_seconds)),
        warmup_rounds: args.warmup_rounds,
        rounds: plan.rounds,
        max_in_flight: args.max_in_flight.max(1),
        floor: false,
        offset: 0,
    };
    // The probe records every replica's sample and returns their sum.
    let ticks = ticks_per_second();
    let samples: Mutex<Vec<Vec<ProcSample>>> = Mutex::new(Vec::new());
    let probe = || {
        let each: Vec<ProcSample> = (replicas.values())
            .filter_map(|(_, pid)| sample(*pid, ticks).ok())
            .collect();
        let sum = ProcSample {
            cpu_secs: each.iter().map(|s| s.cpu_secs).sum(),
            rss_kib: each.iter().map(|s| s.rss_kib).sum(),
            hwm_kib: each.iter().map(|s| s.hwm_kib).sum(),
        };
        samples.lock().unwrap_or_else(|e| e.into_inner()).push(each);
        Some(sum)
    };
    let mut driven = drive::drive(&agents, &clients, &urls, &healthz, schedule, &probe).await?;
    let samples = samples.into_inner().unwrap_or_else(|e| e.into_inner());
    anyhow::ensure!(
        samples.len() == 2 && samples.iter().all(|s| s.len() == n),
        "every replica sampled at the start and the end of the timed rounds"
    );
    let accepted = driven.timed.accepted.max(1) as f64;
    let share = |owned: usize| accepted * owned as f64 / clusters.len() as f64;
    let each = (ids.iter().enumerate())
        .map(|(i, id)| {
            let cpu = samples[1][i].cpu_secs - samples[0][i].cpu_secs;
            let mine = owned.get(id.as_str()).copied().unwrap_or_default();
            let rss = samples[1][i].rss_kib as f64 / 1024.0;
            (id.clone(), mine, cpu * 1e6 / share(mine).max(1.0), rss)
        })
        .collect();
    let cpu_total: f64 = (0..n)
        .map(|i| samples[1][i].cpu_secs - samples[0][i].cpu_secs)
        .sum();
    let refused = driven.timed.rejected_total() + driven.timed.failed;
    for sample in &driven.timed.samples {
        println!("  refusal: {sample}");
    }
    Ok(Measured {
        replicas: n,
        misrouted,
        p50_ms: driven.timed.latency_ms(50.0),
        accepted_per_s: accepted / driven.elapsed.as_secs_f64(),
        cpu_us_per_hb: cpu_total * 1e6 / accepted,
        each,
        p99_ms: driven.timed.latency_ms(99.0),
        refused,
    })
}

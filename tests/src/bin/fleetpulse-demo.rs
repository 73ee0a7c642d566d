//! `fleetpulse-demo`: the whole fleetpulse loop with no real cluster. An embedded hub on
//! loopback HTTPS, three simulated member clusters (in-process Kubernetes API servers), one
//! real agent per cluster running the checks a HealthPolicy gives it, and a ClusterSet with
//! `maxReplicas: 1`. A node of the selected cluster goes NotReady: its API server still
//! answers, but its check fails, and the ClusterSet fails over. Then another cluster loses
//! power entirely. Every step is printed as it happens.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::jiff::Timestamp;

use fleetpulse_agent::checks::resources::{KubeReader, Reader};
use fleetpulse_common::api::SetStatus;
use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, Status};
use fleetpulse_hub::cli::get::{member_cluster_table, set_table};
use fleetpulse_kubesim::KubeSim;
use fleetpulse_tests::scenario::Scenario;
use fleetpulse_tests::{fleet, wait};

/// Run an embedded hub, simulated member clusters and real agents, and watch failover.
#[derive(Debug, Parser)]
#[command(name = "fleetpulse-demo", about)]
struct Args {
    /// How many simulated member clusters.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(3..=20))]
    clusters: u32,
    /// Heartbeat interval of every cluster, in seconds.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=60))]
    interval_seconds: u32,
    /// Grace period of every cluster, in seconds.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=300))]
    grace_period_seconds: u32,
    /// Keep running after the scenario (Ctrl-C to stop) to try `fleetpulse-hub get`.
    #[arg(long)]
    keep_running: bool,
}

/// Every cluster's nodes must all be Ready: a platform team's policy, applied to all.
const POLICY: &str = "apiVersion: fleetpulse.io/v1alpha1
kind: HealthPolicy
metadata: {name: all-nodes-ready, namespace: fleet}
spec:
  clusterSelector: {}
  livenessChecks:
    - name: all-nodes-ready
      readyNodes: {minPercent: 100}
";

fn set_status(s: &Scenario) -> SetStatus {
    let sets = s.hub().fleet.cluster_sets();
    sets.first()
        .and_then(|cs| cs.status.clone())
        .unwrap_or_default()
}

fn selected(s: &Scenario) -> Option<String> {
    set_status(s)
        .selected_cluster_refs
        .first()
        .map(|r| r.name.clone())
}

fn print_tables(s: &Scenario) {
    print!(
        "{}",
        member_cluster_table(&s.member_clusters(), Timestamp::now(), false)
    );
    let sets = s.hub().fleet.cluster_sets();
    println!();
    print!(
        "{}",
        set_table(
            sets.iter().map(|cs| (
                None,
                cs.metadata.name.as_deref(),
                cs.spec.set.max_replicas,
                cs.status.as_ref()
            )),
            Timestamp::now()
        )
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.grace_period_seconds > args.interval_seconds,
        "--grace-period-seconds must be longer than --interval-seconds"
    );
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error".into()),
        )
        .init();
    let started = Instant::now();
    let n = args.clusters as usize;
    let grace = Duration::from_secs(args.grace_period_seconds.into());
    let mut s = Scenario::start(n, args.interval_seconds, args.grace_period_seconds).await?;
    s.write_manifest("policy.yaml", POLICY)?;
    s.write_manifest("primary.yaml", fleet::PRIMARY_CLUSTER_SET)?;
    println!(
        "1. A hub is listening on {} (embedded mode, HTTPS with a throwaway CA).",
        s.url
    );
    println!(
        "   {n} member clusters are simulated Kubernetes API servers with 3 nodes each; each runs a\n   \
         real fleetpulse agent that checks \"all nodes Ready\" (a HealthPolicy) and signs a\n   \
         heartbeat every {}s. A ClusterSet `primary` wants 1 healthy cluster.\n",
        args.interval_seconds
    );
    let sims: Vec<KubeSim> = (0..n)
        .map(|_| KubeSim::builder().nodes(3).build())
        .collect();
    for (i, sim) in sims.iter().enumerate() {
        s.start_agent_with_engine(i, Reader::Kube(KubeReader::new(sim.client())))?;
    }
    let took = wait::until(
        "every cluster Healthy and one selected",
        Duration::from_secs(60),
        || (0..n).all(|i| s.condition(i, HEALTHY) == Status::True) && selected(&s).is_some(),
    )
    .await?;
    println!(
        "2. After {:.1}s every cluster is Healthy and the ClusterSet selected one:\n",
        took.as_secs_f64()
    );
    print_tables(&s);

    let first = selected(&s).expect("selected");
    let victim = s
        .clusters
        .iter()
        .position(|c| c.id.name == first)
        .expect("a known cluster");
    println!(
        "\n3. Fault: node-2 of {first} goes NotReady. Its API server still answers /healthz, so an\n   \
         API-server health check would call it fine; its agent's check does not."
    );
    let fault = Instant::now();
    sims[victim].set_node_ready("node-2", false);
    wait::until(
        "the ClusterSet to fail over",
        Duration::from_secs(60),
        || selected(&s).is_some_and(|c| c != first),
    )
    .await?;
    let second = selected(&s).expect("selected");
    println!(
        "   {:.1}s later the hub has it Healthy=False (it still reports: Reachable=True) and the\n   \
         ClusterSet moved to {second} in the same evaluation:\n",
        fault.elapsed().as_secs_f64()
    );
    print_tables(&s);
    if let Some(reason) = set_status(&s).last_failover_reason {
        println!("   reason: {reason}");
    }

    let second_index = s
        .clusters
        .iter()
        .position(|c| c.id.name == second)
        .expect("a known cluster");
    println!("\n4. Fault: {second} loses power; its agent stops sending heartbeats.");
    let fault = Instant::now();
    s.stop_agent(second_index).await?;
    wait::until("the second failover", grace * 4, || {
        s.condition(second_index, REACHABLE) == Status::False
            && selected(&s).is_some_and(|c| c != second)
    })
    .await?;
    let third = selected(&s).expect("selected");
    println!(
        "   {:.1}s later (grace period {}s) the hub marked it unreachable and the ClusterSet moved to\n   \
         {third} ({first} is not eligible: its node-2 is still NotReady).\n",
        fault.elapsed().as_secs_f64(),
        args.grace_period_seconds
    );
    print_tables(&s);
    println!(
        "\nSummary: {n} clusters, 2 faults, 2 failovers, no flapping; the hub never connected to a\n\
         cluster (agents push signed reports). Total {:.1}s.",
        started.elapsed().as_secs_f64()
    );
    if args.keep_running {
        println!(
            "\nStill running; in another shell:\n  cargo run -p fleetpulse-hub -- get memberclusters --server {} --ca {}\nCtrl-C to stop.",
            s.url,
            s.pki.ca_cert.display()
        );
        tokio::signal::ctrl_c().await?;
    }
    s.shutdown().await
}

//! `fleetpulse-demo`: fleetpulse end to end with no cluster. Starts an embedded hub on
//! loopback HTTPS (a throwaway CA), one agent per simulated cluster, shows the fleet turn
//! healthy and a ClusterSet select one of them, stops that cluster's agent, and shows the
//! hub mark it unreachable and the ClusterSet fail over.
#![forbid(unsafe_code)]

use std::time::Duration;

use clap::Parser;
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::SetStatus;
use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, Status};
use fleetpulse_hub::cli::get::{member_cluster_table, set_table};
use fleetpulse_tests::scenario::Scenario;
use fleetpulse_tests::{fleet, wait};

/// Run an embedded hub and simulated agents on loopback, and watch one cluster fail.
#[derive(Debug, Parser)]
#[command(name = "fleetpulse-demo", about)]
struct Args {
    /// How many simulated clusters.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=200))]
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

fn set_status(s: &Scenario) -> SetStatus {
    let sets = s.hub().fleet.cluster_sets();
    sets.first()
        .and_then(|cs| cs.status.clone())
        .unwrap_or_default()
}

fn cluster_sets(s: &Scenario) -> String {
    let sets = s.hub().fleet.cluster_sets();
    set_table(
        sets.iter().map(|cs| {
            (
                None,
                cs.metadata.name.as_deref(),
                cs.spec.set.max_replicas,
                cs.status.as_ref(),
            )
        }),
        Timestamp::now(),
    )
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
    let n = args.clusters as usize;
    let mut s = Scenario::start(n, args.interval_seconds, args.grace_period_seconds).await?;
    s.write_manifest("primary.yaml", fleet::PRIMARY_CLUSTER_SET)?;
    println!(
        "hub listening on {} (embedded mode, TLS from a throwaway CA)",
        s.url
    );
    println!(
        "starting {n} agents; each signs a heartbeat every {}s\n",
        args.interval_seconds
    );
    for i in 0..n {
        s.start_agent(i)?;
    }
    let took = wait::until("every cluster Healthy", Duration::from_secs(30), || {
        (0..n).all(|i| s.condition(i, HEALTHY) == Status::True)
    })
    .await?;
    println!(
        "every cluster is Healthy after {:.1}s:\n",
        took.as_secs_f64()
    );
    print!(
        "{}",
        member_cluster_table(&s.member_clusters(), Timestamp::now())
    );

    wait::until(
        "the ClusterSet to select a cluster",
        Duration::from_secs(10),
        || set_status(&s).selected_cluster_refs.len() == 1,
    )
    .await?;
    println!("\nthe ClusterSet `primary` (maxReplicas: 1) selected one of them:\n");
    print!("{}", cluster_sets(&s));

    let first = set_status(&s).selected_cluster_refs[0].name.clone();
    let victim = s
        .clusters
        .iter()
        .position(|c| c.id.name == first)
        .expect("a known cluster");
    println!(
        "\nstopping the agent of {} (as if its cluster lost power)...",
        s.clusters[victim].id
    );
    s.stop_agent(victim).await?;
    let grace = Duration::from_secs(args.grace_period_seconds.into());
    let took = wait::until("the stopped cluster unreachable", grace * 3, || {
        s.condition(victim, REACHABLE) == Status::False
    })
    .await?;
    println!(
        "the hub marked it unreachable {:.1}s later (grace period {}s); the others stay healthy:\n",
        took.as_secs_f64(),
        args.grace_period_seconds
    );
    print!(
        "{}",
        member_cluster_table(&s.member_clusters(), Timestamp::now())
    );
    println!("\nand in the same evaluation the ClusterSet failed over:\n");
    print!("{}", cluster_sets(&s));
    if let Some(reason) = set_status(&s).last_failover_reason {
        println!("\nreason: {reason}");
    }
    if args.keep_running {
        println!(
            "\nstill running; in another shell:\n  cargo run -p fleetpulse-hub -- get memberclusters --server {} --ca {}\nCtrl-C to stop.",
            s.url,
            s.pki.ca_cert.display()
        );
        tokio::signal::ctrl_c().await?;
    }
    s.shutdown().await
}

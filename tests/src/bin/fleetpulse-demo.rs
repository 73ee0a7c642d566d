//! `fleetpulse-demo`: the whole fleetpulse loop with no real cluster. An embedded hub on
//! loopback HTTPS, three simulated member clusters (in-process Kubernetes API servers), one
//! real agent per cluster running the checks a HealthPolicy gives it, and a ClusterSet with
//! `maxReplicas: 1`. A node of the selected cluster goes NotReady: its API server still
//! answers, but its check fails, and the ClusterSet fails over. Then another cluster loses
//! power entirely. A deployment tool follows each failover: the hub mirrors set membership
//! onto Argo CD cluster Secrets on a simulated Argo CD cluster, and the demo evaluates an
//! ApplicationSet's cluster generator over them. Every step is printed as it happens.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::jiff::Timestamp;

use fleetpulse_agent::checks::resources::{KubeReader, Reader};
use fleetpulse_common::api::SetStatus;
use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, Status};
use fleetpulse_hub::cli::get::{member_cluster_table, set_table};
use fleetpulse_hub::mirrors::MirrorArgs;
use fleetpulse_hub::mirrors::settings::DefaultMirror;
use fleetpulse_kubesim::KubeSim;
use fleetpulse_tests::scenario::Scenario;
use fleetpulse_tests::{fleet, wait};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ListParams, PostParams};

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

/// Where Argo CD keeps its cluster Secrets.
const ARGOCD: &str = "argocd";
/// What an ApplicationSet's cluster generator selects: Argo CD cluster Secrets that carry
/// the ClusterSet's membership label, which the hub keeps on them.
const GENERATOR_SELECTOR: &str =
    "argocd.argoproj.io/secret-type=cluster,clusterset.fleetpulse.io/primary=selected";

/// The simulated Argo CD cluster's cluster Secrets: one per member cluster, as `argocd
/// cluster add` leaves them.
async fn install_cluster_secrets(argo: &KubeSim, s: &Scenario) -> anyhow::Result<()> {
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": ARGOCD}}))?;
    Api::all(argo.client())
        .create(&PostParams::default(), &namespace)
        .await?;
    let secrets: Api<Secret> = Api::namespaced(argo.client(), ARGOCD);
    for c in &s.clusters {
        let name = &c.id.name;
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
            "stringData": {"name": name, "server": format!("https://{name}.example.com")}
        }))?;
        secrets.create(&PostParams::default(), &secret).await?;
    }
    Ok(())
}

/// The clusters the ApplicationSet's cluster generator picks now.
async fn generator_picks(argo: &KubeSim) -> Vec<String> {
    let secrets: Api<Secret> = Api::namespaced(argo.client(), ARGOCD);
    let params = ListParams::default().labels(GENERATOR_SELECTOR);
    let mut names: Vec<String> = (secrets.list(&params).await)
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    names.sort();
    names
}

/// Waits until the generator picks exactly `cluster`.
async fn until_generator_picks(argo: &KubeSim, cluster: &str) -> anyhow::Result<()> {
    wait::until_some(
        "the ApplicationSet's cluster generator to follow",
        Duration::from_secs(60),
        || async { (generator_picks(argo).await == [cluster]).then_some(()) },
    )
    .await?;
    Ok(())
}

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
    // The hub mirrors health and membership onto the Argo CD cluster's Secrets (what
    // `--mirror-kubeconfig` and `--mirror-default argocd-secret:namespace=argocd` do).
    let argo = KubeSim::new();
    let mirrors = MirrorArgs {
        mirror_defaults: vec![
            DefaultMirror::parse("argocd-secret:namespace=argocd").map_err(anyhow::Error::msg)?,
        ],
        mirror_kubeconfig: None,
        mirror_resync_seconds: 300,
    };
    let mut s = Scenario::start_with_mirrors(
        n,
        args.interval_seconds,
        args.grace_period_seconds,
        Some((argo.client(), mirrors)),
    )
    .await?;
    install_cluster_secrets(&argo, &s).await?;
    s.write_manifest("policy.yaml", fleet::ALL_NODES_READY_POLICY)?;
    s.write_manifest("primary.yaml", fleet::PRIMARY_CLUSTER_SET)?;
    println!(
        "1. A hub is listening on {} for agents (embedded mode, HTTPS with a throwaway CA),\n   \
         its read API and /metrics on {} (loopback).\n   \
         Console: {}console/ (open it in a browser to watch the failovers live; the CA is\n   \
         throwaway, so the browser asks once to trust the certificate)",
        s.url, s.admin_url, s.admin_url
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
    until_generator_picks(&argo, &first).await?;
    println!(
        "\n   An Argo CD ApplicationSet whose cluster generator selects\n   \
         {GENERATOR_SELECTOR}\n   \
         (the label the hub keeps on Argo CD's cluster Secrets) deploys to: {first}"
    );

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
    until_generator_picks(&argo, &second).await?;
    println!(
        "   The ApplicationSet follows: it deploys to {second} now ({:.1}s after the fault).",
        fault.elapsed().as_secs_f64()
    );

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
    until_generator_picks(&argo, &third).await?;
    println!(
        "   The ApplicationSet follows: it deploys to {third} now ({:.1}s after the fault).",
        fault.elapsed().as_secs_f64()
    );
    println!(
        "\nSummary: {n} clusters, 2 faults, 2 failovers, no flapping; the hub never connected to a\n\
         cluster (agents push signed reports), and the deployment tool moved with each failover.\n\
         Total {:.1}s.",
        started.elapsed().as_secs_f64()
    );
    if args.keep_running {
        println!(
            "\nStill running; in another shell:\n  cargo run -p fleetpulse-hub -- get memberclusters --server {} --ca {}\nCtrl-C to stop.",
            s.admin_url,
            s.pki.ca_cert.display()
        );
        tokio::signal::ctrl_c().await?;
    }
    s.shutdown().await
}

//! The `fleetpulse-hub` command line: `serve`, `crds`, `get`, `describe`.

pub mod describe;
pub mod enrolment;
pub mod get;
mod hub_api;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use fleetpulse_common::api::crds;
use fleetpulse_common::cli::LogFormat;
use fleetpulse_common::protocol::replay::Freshness;

use crate::admission::BatchSettings;
use crate::core::brake::BrakeSettings;
use crate::core::health::Debounce;
use crate::core::rollout::RolloutSettings;
use crate::kubernetes::leader::LeaderSettings;
use crate::server::{Hub, HubOptions};
use crate::shards::ShardSettings;

/// fleetpulse hub: verifies signed heartbeats from cluster agents and keeps each cluster's
/// health.
#[derive(Debug, Parser)]
#[command(name = "fleetpulse-hub", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Log format: human-readable text (coloured only on a terminal) or one JSON object
    /// per line, in the same shape as the agent's.
    #[arg(long, global = true, env = "FLEETPULSE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log filter in tracing's env-filter syntax, e.g. `info` or `info,fleetpulse_hub=debug`.
    #[arg(long, global = true, env = "RUST_LOG", default_value = "info")]
    pub log_filter: String,
    /// On failure, print every cause of the error on its own line and, when
    /// `RUST_BACKTRACE=1` is set, where it arose (otherwise one line: what failed and why).
    #[arg(short, long, global = true, env = "FLEETPULSE_VERBOSE")]
    pub verbose: bool,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the hub (embedded mode: objects from --manifests, state under --data).
    Serve(Box<ServeArgs>),
    /// Print the CustomResourceDefinitions as YAML (or write one file each with --out-dir).
    Crds {
        /// Write `<plural>.fleetpulse.io.yaml` files into this directory instead.
        #[arg(long)]
        out_dir: Option<PathBuf>,
    },
    /// Show objects and their health from a running hub.
    Get(get::GetArgs),
    /// Show one MemberCluster in full from a running hub: conditions, checks, keys, sets,
    /// recent transitions.
    Describe(describe::DescribeArgs),
    /// Bootstrap tokens agents enrol with: create, list, revoke.
    Token(enrolment::TokenArgs),
    /// Approve a cluster's pending registration (tokens created with --approval manual).
    Approve(enrolment::ApproveArgs),
    /// Enrolled keys: revoke, or ask for a rotation.
    Key(enrolment::KeyArgs),
}

/// `serve` flags.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Directory of MemberCluster / ClusterSet / Set / HealthPolicy YAML (rescanned on change).
    /// Leader election and shards need --kube, so they are refused beside it.
    #[arg(long, env = "FLEETPULSE_MANIFESTS", required_unless_present = "kube",
          conflicts_with_all = ["leader_elect", "shards"])]
    pub manifests: Option<PathBuf>,
    /// Directory for the embedded store (created if missing).
    #[arg(long, env = "FLEETPULSE_DATA", required_unless_present = "kube")]
    pub data: Option<PathBuf>,
    /// Kubernetes mode: watch the fleetpulse CRDs on the management cluster and write their
    /// status (instead of --manifests and --data).
    #[arg(long, env = "FLEETPULSE_KUBE", conflicts_with_all = ["manifests", "data"])]
    pub kube: bool,
    /// Kubeconfig of the management cluster for --kube (default: the in-cluster service
    /// account, else the usual kubeconfig lookup).
    #[arg(long, env = "FLEETPULSE_KUBECONFIG", requires = "kube")]
    pub kubeconfig: Option<PathBuf>,
    /// Address agents connect to: heartbeats, config, enrolment, and the /healthz and
    /// /readyz probes (nothing else; the read API and /metrics are on --admin-listen).
    #[arg(long, env = "FLEETPULSE_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// The admin listener: the read API and /metrics, and who may read them.
    #[command(flatten)]
    pub admin: crate::server::AdminOptions,
    /// PEM certificate chain for HTTPS.
    #[arg(long, env = "FLEETPULSE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for HTTPS.
    #[arg(long, env = "FLEETPULSE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP instead of HTTPS. Development only: reports are still signed, but
    /// the agent cannot authenticate the hub.
    #[arg(long, env = "FLEETPULSE_INSECURE_HTTP", conflicts_with = "tls_cert")]
    pub insecure_http: bool,
    /// What any one client may hold: connections, timeouts, HTTP/2 streams.
    #[command(flatten)]
    pub limits: crate::server::ConnectionLimits,
    /// This hub's identity; agents must put it in each report's `aud`.
    #[arg(long, env = "FLEETPULSE_AUDIENCE", default_value = "fleetpulse")]
    pub audience: String,
    /// Tolerated clock difference between agents and the hub, in seconds.
    #[arg(long, env = "FLEETPULSE_MAX_CLOCK_SKEW_SECONDS", default_value_t = 120)]
    pub max_clock_skew_seconds: i64,
    /// Consecutive passing reports before an unhealthy cluster is Healthy again.
    #[arg(long, env = "FLEETPULSE_HEALTHY_AFTER_REPORTS", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub healthy_after_reports: u32,
    /// Consecutive reports with a failing liveness check before a cluster is unhealthy.
    #[arg(long, env = "FLEETPULSE_UNHEALTHY_AFTER_REPORTS", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub unhealthy_after_reports: u32,
    /// Share of reporting clusters that must go quiet at once for the hub to assume it is
    /// the partitioned side and freeze set reassignment (0 < x <= 1).
    #[arg(long, env = "FLEETPULSE_PARTITION_THRESHOLD", default_value_t = 0.55, value_parser = parse_share)]
    pub partition_threshold: f64,
    /// Fewest clusters that must go quiet at once to engage the partition brake (2: both
    /// clusters of an active/passive pair going quiet together engage it; one alone never
    /// does, and no set is ever emptied by health either way).
    #[arg(long, env = "FLEETPULSE_PARTITION_MIN_CLUSTERS", default_value_t = 2)]
    pub partition_min_clusters: usize,
    /// Release the partition brake after this many seconds even if the clusters stay quiet
    /// (0: only when heartbeats return).
    #[arg(
        long,
        env = "FLEETPULSE_PARTITION_RELEASE_AFTER_SECONDS",
        default_value_t = 0
    )]
    pub partition_release_after_seconds: u64,
    /// The rollout brake trips when a HealthPolicy change is followed by more than this
    /// percentage of the clusters it changed failing one of its checks.
    #[arg(long, env = "FLEETPULSE_ROLLOUT_BRAKE_PERCENT", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rollout_brake_percent: u32,
    /// Fewest clusters a HealthPolicy change must reach for the rollout brake to judge it.
    #[arg(long, env = "FLEETPULSE_ROLLOUT_BRAKE_MIN_CLUSTERS", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    pub rollout_brake_min_clusters: u64,
    /// Seconds after a HealthPolicy change during which its checks' failures are
    /// attributed to it.
    #[arg(long, env = "FLEETPULSE_ROLLOUT_BRAKE_WATCH_SECONDS", default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..))]
    pub rollout_brake_watch_seconds: u64,
    /// After an enrolled agent rotates its key, how long the hub still accepts the old
    /// one (reports in flight, a restarting agent), e.g. `10m`; then it is retired.
    #[arg(long, env = "FLEETPULSE_KEY_OVERLAP", default_value = "10m",
          value_parser = fleetpulse_common::duration::parse)]
    pub key_overlap: Duration,
    /// Kubernetes mode: the namespace of the bootstrap-token and key-set Secrets (default:
    /// the hub's own, from POD_NAMESPACE, else `fleetpulse-system`). Whoever may write
    /// Secrets there administers enrolment.
    #[arg(long, env = "FLEETPULSE_ENROLMENT_NAMESPACE")]
    pub enrolment_namespace: Option<String>,
    /// Kubernetes mode: the namespace of the hub-state ConfigMaps, where the leader keeps
    /// accepted positions and last-heard times for the next one (default: the hub's own,
    /// from POD_NAMESPACE, else `fleetpulse-system`).
    #[arg(long, env = "FLEETPULSE_STATE_NAMESPACE")]
    pub state_namespace: Option<String>,
    /// Seconds between flushes of accepted sequence numbers to the store (in Kubernetes
    /// mode, of the hub-state ConfigMaps).
    #[arg(long, env = "FLEETPULSE_SEQ_FLUSH_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub seq_flush_seconds: u64,
    /// Verify concurrent heartbeats' signatures in batches, about twice as fast per
    /// signature; `false`: one `verify_strict` each (what batching gives up is in
    /// docs/protocol.md).
    #[arg(long, env = "FLEETPULSE_BATCH_VERIFY", default_value_t = true, action = clap::ArgAction::Set)]
    pub batch_verify: bool,
    /// Most signatures verified in one batch.
    #[arg(long, env = "FLEETPULSE_BATCH_VERIFY_MAX", default_value_t = BatchSettings::default().max_batch, value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u64).range(2..=1024), |n| n as usize))]
    pub batch_verify_max: usize,
    /// Longest a heartbeat waits for others to join its batch, in milliseconds.
    #[arg(long, env = "FLEETPULSE_BATCH_VERIFY_WAIT_MS", default_value_t = BatchSettings::default().max_wait.as_millis() as u64, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub batch_verify_wait_ms: u64,
    /// Kubernetes mode: seconds between rewrites of each reporting cluster's status, so its
    /// `lastHeartbeatTime` on the API is at most this old (0: write on transitions only).
    #[arg(long, env = "FLEETPULSE_STATUS_REFRESH_SECONDS", default_value_t = 300)]
    pub status_refresh_seconds: u64,
    /// Also expose `fleetpulse_hub_cluster_condition`: one series per MemberCluster,
    /// condition and status (9 per cluster). Off by default: a fleet of 10,000 clusters
    /// would add 90,000 series.
    #[arg(long, env = "FLEETPULSE_PER_CLUSTER_METRICS")]
    pub per_cluster_metrics: bool,
    /// Kubernetes mode: elect a leader among hub replicas with a Lease; the others stand
    /// by (not ready, refusing heartbeats) until the lease is free.
    #[arg(long, env = "FLEETPULSE_LEADER_ELECT", requires = "kube")]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease (default: the Pod's namespace, else
    /// `default`).
    #[arg(long, env = "FLEETPULSE_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Name of the leader-election Lease.
    #[arg(long, env = "FLEETPULSE_LEASE_NAME", default_value = "fleetpulse-hub")]
    pub lease_name: String,
    /// Seconds the lease lasts without renewal: how long a standby waits for a dead leader.
    #[arg(long, env = "FLEETPULSE_LEASE_DURATION_SECONDS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(3..))]
    pub lease_duration_seconds: u64,
    /// This replica's identity in the Lease and in Events (default: the Pod name, else
    /// the host name and process id).
    #[arg(long, env = "FLEETPULSE_IDENTITY")]
    pub identity: Option<String>,
    /// Kubernetes mode: share the fleet with the other replicas run with the same flag,
    /// cut into this many shards (every replica must use the same count; 32 suits up to
    /// a few dozen replicas). Each shard is owned by one replica through a Lease of its
    /// own, `fleetpulse-shard-K` in --lease-namespace, lasting --lease-duration-seconds;
    /// every replica is ready and takes the heartbeats of the shards it owns, and sends
    /// agents of other shards to their owner's --shard-url.
    #[arg(long, env = "FLEETPULSE_SHARDS", requires = "kube", conflicts_with = "leader_elect",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: Option<u32>,
    /// With --shards: the URL agents reach this replica at (its own, not the shared
    /// Service's), written on the shard Leases it holds so other replicas can send agents
    /// to it, e.g. `https://$(POD_NAME).hub.example.com:8443` (default: the --listen
    /// address when it is a concrete one).
    #[arg(long, env = "FLEETPULSE_SHARD_URL", requires = "shards", value_parser = parse_shard_url)]
    pub shard_url: Option<String>,
    /// This replica's Pod (set from the downward API). With --pod-namespace and
    /// --leader-elect, the leader labels its Pod `fleetpulse.io/leader=true`, for a
    /// Service that routes agents to the leader, and standbys count as ready.
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// This replica's namespace (set from the downward API).
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: Option<String>,
    /// Mirrors: the objects of other tools (Sveltos, Argo CD, Cluster API, OCM, Karmada,
    /// KubeFleet) that health and set membership are projected onto.
    #[command(flatten)]
    pub mirrors: crate::mirrors::MirrorArgs,
    /// Adoption: MemberClusters made from the cluster objects of other tools.
    #[command(flatten)]
    pub adopt: crate::adoption::AdoptArgs,
}

impl ServeArgs {
    /// Hub options from the flags.
    pub fn options(&self) -> HubOptions {
        let mut o = HubOptions::new(
            self.manifests.clone().unwrap_or_default(),
            self.data.clone().unwrap_or_default(),
            self.listen,
        );
        o.tls = self.tls_cert.clone().zip(self.tls_key.clone());
        o.insecure_http = self.insecure_http;
        o.admin = self.admin.clone();
        o.limits = self.limits.clone();
        o.decisions.audience = self.audience.clone();
        o.decisions.freshness = Freshness {
            max_clock_skew_secs: self.max_clock_skew_seconds,
            ..Freshness::default()
        };
        o.decisions.debounce = Debounce {
            healthy_after: self.healthy_after_reports,
            unhealthy_after: self.unhealthy_after_reports,
        };
        o.position_flush_interval = Duration::from_secs(self.seq_flush_seconds);
        o.batch_verify = self.batch_verify.then(|| BatchSettings {
            max_batch: self.batch_verify_max,
            max_wait: Duration::from_millis(self.batch_verify_wait_ms),
        });
        o.status_refresh = Duration::from_secs(self.status_refresh_seconds);
        o.per_cluster_metrics = self.per_cluster_metrics;
        o.leader = self.leader_elect.then(|| LeaderSettings {
            namespace: self.lease_namespace(),
            name: self.lease_name.clone(),
            identity: self.identity(),
            duration: Duration::from_secs(self.lease_duration_seconds),
            pod: self.pod_namespace.clone().zip(self.pod_name.clone()),
        });
        o.shards = self.shards.map(|shards| ShardSettings {
            namespace: self.lease_namespace(),
            identity: self.identity(),
            shards,
            duration: Duration::from_secs(self.lease_duration_seconds),
            url: self.shard_url.clone(),
        });
        o.decisions.brake = BrakeSettings {
            threshold: self.partition_threshold,
            min_clusters: self.partition_min_clusters.max(1),
            release_after: (self.partition_release_after_seconds > 0)
                .then(|| Duration::from_secs(self.partition_release_after_seconds)),
        };
        o.decisions.rollout = RolloutSettings {
            max_unhealthy_percent: self.rollout_brake_percent,
            min_clusters: self.rollout_brake_min_clusters as usize,
            watch: Duration::from_secs(self.rollout_brake_watch_seconds),
        };
        o.mirrors = self.mirrors.clone();
        o.key_overlap = self.key_overlap;
        o.adopt = self.adopt.clone();
        o.enrolment_namespace = (self.enrolment_namespace.clone())
            .or_else(|| self.pod_namespace.clone())
            .unwrap_or_else(|| crate::enrolment::DEFAULT_NAMESPACE.into());
        o.state_namespace = (self.state_namespace.clone())
            .or_else(|| self.pod_namespace.clone())
            .unwrap_or_else(|| crate::enrolment::DEFAULT_NAMESPACE.into());
        o
    }
}

impl ServeArgs {
    /// The namespace of the leader and shard Leases.
    fn lease_namespace(&self) -> String {
        (self.lease_namespace.clone())
            .or_else(|| self.pod_namespace.clone())
            .unwrap_or_else(|| "default".into())
    }

    /// This replica's identity on its Leases.
    fn identity(&self) -> String {
        (self.identity.clone())
            .or_else(|| self.pod_name.clone())
            .unwrap_or_else(default_identity)
    }
}

/// An absolute `http(s)://` URL with a host and no query, as agents are sent to it.
fn parse_shard_url(s: &str) -> Result<String, String> {
    let fix = "give the URL agents reach this replica at, e.g. https://hub-0.hub.example.com:8443";
    let url = reqwest::Url::parse(s).map_err(|e| format!("{s:?} is not a URL ({e}): {fix}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "{s:?} is not an http:// or https:// URL with a host: {fix}"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("{s:?} has a query or fragment: {fix}"));
    }
    Ok(s.trim_end_matches('/').to_owned())
}

/// The host name and process id: unique among replicas on one machine or in one cluster.
fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "fleetpulse-hub".into());
    format!("{host}-{}", std::process::id())
}

fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err(format!(
            "{s:?} is not a share between 0 (exclusive) and 1, e.g. 0.55"
        )),
    }
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    fleetpulse_common::cli::init_logging(cli.log_format, &cli.log_filter)?;
    match cli.command {
        Command::Crds { out_dir: None } => fleetpulse_common::cli::print(&crds::to_yaml()),
        Command::Crds { out_dir: Some(dir) } => {
            std::fs::create_dir_all(&dir)?;
            for crd in crds::all() {
                let path = dir.join(crds::file_name(&crd));
                std::fs::write(&path, crds::crd_yaml(&crd))?;
                fleetpulse_common::cli::print(&format!("wrote {}\n", path.display()))?;
            }
            Ok(())
        }
        Command::Get(args) => get::run(args).await,
        Command::Token(args) => enrolment::run(&args.store, args.command, enrolment::token).await,
        Command::Approve(args) => {
            enrolment::run(&args.store, args.cluster, enrolment::approve).await
        }
        Command::Key(args) => enrolment::run(&args.store, args.command, enrolment::key).await,
        Command::Describe(args) => describe::run(args).await,
        Command::Serve(args) => {
            let mut options = args.options();
            if args.kube {
                options.kube = Some(kube_client(args.kubeconfig.as_deref()).await?);
            }
            if let Some(path) = &args.mirrors.mirror_kubeconfig {
                options.mirror_client = Some(kube_client(Some(path)).await?);
            }
            let hub = Hub::start(options).await?;
            hub.run_until(shutdown_signal()).await?;
            Ok(())
        }
    }
}

pub(crate) async fn kube_client(
    kubeconfig: Option<&std::path::Path>,
) -> anyhow::Result<kube::Client> {
    use anyhow::Context;
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer()
            .await
            .context("no Kubernetes configuration found; pass --kubeconfig")?,
    };
    Ok(kube::Client::try_from(config)?)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests;

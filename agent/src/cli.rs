//! The command line: `keygen` writes a key and says what to put on the hub; `run` runs the
//! checks and sends heartbeats until SIGTERM or Ctrl-C (serving `--listen`'s probes and
//! metrics meanwhile); `eval` tries checks offline. Every flag can also be set by an environment
//! variable (`FLEETPULSE_...`); the Helm chart passes flags, which clap checks (a mistyped variable would be ignored).

pub mod eval;
mod kube_client;
pub mod pubkey;
mod signals;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use fleetpulse_common::enrol::pin::CaPin;
use fleetpulse_common::enrol::token::BootstrapToken;
use fleetpulse_common::protocol::report::ClusterId;
use tokio_util::sync::CancellationToken;

use fleetpulse_common::lua::LuaLimits;

use crate::checks::ChecksSource;
use crate::checks::engine::{CheckEngine, EngineOptions};
use crate::checks::resources::Reader;
use crate::metrics::AgentMetrics;
use crate::options::{AgentOptions, DEFAULT_AUDIENCE};
use crate::rotation::{KeySecret, KeyStore, RotationSettings};
use crate::serve::{self, Endpoint};
use crate::{Url, key_secret, keys, tls};
use ed25519_dalek::SigningKey;

pub use fleetpulse_common::cli::LogFormat;

/// fleetpulse agent: pushes signed heartbeats from a managed cluster to the fleetpulse hub.
#[derive(Debug, Parser)]
#[command(name = "fleetpulse-agent", version, about, long_about = None)]
pub struct Cli {
    /// Log format: human-readable text or one JSON object per line.
    #[arg(
        long,
        env = "FLEETPULSE_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text,
        global = true
    )]
    pub log_format: LogFormat,
    /// Log filter in tracing's env-filter syntax, e.g. `info` or `fleetpulse_agent=debug`.
    #[arg(long, env = "FLEETPULSE_LOG", default_value = "info", global = true)]
    pub log_filter: String,
    /// On failure, print every cause of the error on its own line and, when
    /// `RUST_BACKTRACE=1` is set, where it arose (otherwise one line: what failed and why).
    #[arg(short, long, env = "FLEETPULSE_VERBOSE", global = true)]
    pub verbose: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant, reason = "parsed once at startup")]
pub enum Command {
    /// Generate the cluster's Ed25519 key pair; print the public key to add to the hub.
    Keygen(KeygenArgs),
    /// Send heartbeats to the hub until stopped (SIGTERM or Ctrl-C).
    Run(RunArgs),
    /// Evaluate a MemberCluster's checks against objects from a file, offline.
    Eval(eval::EvalArgs),
    /// Print the public key of the agent's key (from --key-file or its Secret), as
    /// MemberCluster spec.agent.publicKeys wants it.
    Pubkey(pubkey::PubkeyArgs),
}

/// Flags of `keygen`.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Where to write the private key (PKCS#8 PEM, mode 0600).
    #[arg(long, value_name = "FILE", env = "FLEETPULSE_KEY_FILE")]
    pub out: PathBuf,
    /// Replace an existing key file. The agent then signs with the new key: add its public
    /// key to the MemberCluster's spec.agent.publicKeys and remove the old one.
    #[arg(long, env = "FLEETPULSE_KEYGEN_FORCE")]
    pub force: bool,
}

/// Flags of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Base URL of the hub, e.g. `https://fleetpulse-hub.example.com:8443`.
    #[arg(long, value_name = "URL", env = "FLEETPULSE_HUB")]
    pub hub: Url,
    /// The MemberCluster on the hub this agent reports for.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        env = "FLEETPULSE_CLUSTER",
        value_parser = ClusterId::parse
    )]
    pub cluster: ClusterId,
    /// The cluster's private key (from `fleetpulse-agent keygen`). Without it the key is
    /// kept in the Secret --key-secret of --agent-namespace, generated on first start.
    #[arg(long, value_name = "FILE", env = "FLEETPULSE_KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// Name of the Secret holding the key when no --key-file is given.
    #[arg(
        long,
        value_name = "NAME",
        env = "FLEETPULSE_KEY_SECRET",
        default_value = "fleetpulse-agent-key"
    )]
    pub key_secret: String,
    /// Namespace the agent runs in (its key Secret lives there).
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "FLEETPULSE_AGENT_NAMESPACE",
        default_value = "fleetpulse-system"
    )]
    pub agent_namespace: String,
    /// PEM bundle of the CA(s) that signed the hub's certificate; only these are trusted.
    /// Without it the system roots are.
    #[arg(long, value_name = "FILE", env = "FLEETPULSE_HUB_CA")]
    pub hub_ca: Option<PathBuf>,
    /// One-time bootstrap token from `fleetpulse-hub token create`: the agent registers its
    /// key with it (generating the key if --key-file names no file yet, or in its Secret)
    /// and waits for the hub to trust it before sending heartbeats. Needs --hub-ca-hash.
    #[arg(long, value_name = "TOKEN", env = "FLEETPULSE_BOOTSTRAP_TOKEN",
          value_parser = BootstrapToken::parse, requires = "hub_ca_hash")]
    pub bootstrap_token: Option<BootstrapToken>,
    /// The hub CA pin `sha256:HEX` that `fleetpulse-hub token create` printed: only a hub
    /// whose certificate chain holds a CA with this public key is trusted, checked before
    /// anything is sent. Replaces --hub-ca.
    #[arg(
        long,
        value_name = "sha256:HEX",
        env = "FLEETPULSE_HUB_CA_HASH",
        conflicts_with = "hub_ca"
    )]
    pub hub_ca_hash: Option<CaPin>,
    /// The hub's identity; must match the hub's --audience.
    #[arg(long, value_name = "AUD", env = "FLEETPULSE_AUDIENCE", default_value = DEFAULT_AUDIENCE)]
    pub audience: String,
    /// UID of this managed cluster, reported to the hub (e.g. the kube-system namespace UID).
    #[arg(
        long,
        value_name = "UID",
        env = "FLEETPULSE_CLUSTER_UID",
        default_value = ""
    )]
    pub cluster_uid: String,
    /// Heartbeat interval in seconds until the hub answers with the one it wants.
    #[arg(long, value_name = "N", env = "FLEETPULSE_INTERVAL_SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub interval_seconds: u64,
    /// Allow a plain http:// hub URL. Development only: heartbeats travel unencrypted.
    #[arg(long, env = "FLEETPULSE_INSECURE_HTTP")]
    pub insecure_http: bool,
    /// Kubeconfig of the managed cluster. Without it the agent reads `$KUBECONFIG` (or
    /// `~/.kube/config`) as kubectl does, else uses its in-cluster service account, or,
    /// outside a cluster, runs only the checks that need no Kubernetes API.
    #[arg(long, value_name = "FILE", env = "FLEETPULSE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Deadline of one Lua check evaluation, in milliseconds.
    #[arg(long, value_name = "MS", env = "FLEETPULSE_LUA_DEADLINE_MS", default_value_t = 250,
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub lua_deadline_ms: u64,
    /// Memory one Lua check evaluation may allocate, in MiB.
    #[arg(long, value_name = "MIB", env = "FLEETPULSE_LUA_MEMORY_MIB", default_value_t = 32,
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub lua_memory_mib: u64,
    /// Namespace pod checks run their pods in, unless a check names its own.
    #[arg(long, value_name = "NAMESPACE", env = "FLEETPULSE_CHECKS_NAMESPACE",
          default_value = crate::checks::engine::DEFAULT_CHECKS_NAMESPACE)]
    pub checks_namespace: String,
    /// Serve `/healthz`, `/readyz` and `/metrics` over plain HTTP on this address, e.g.
    /// `0.0.0.0:9090` (the chart's probes and ServiceMonitor use it). `/readyz` fails until
    /// the hub accepts a heartbeat and when none was accepted for 3 intervals. Off when unset.
    #[arg(long, value_name = "ADDR", env = "FLEETPULSE_LISTEN")]
    pub listen: Option<std::net::SocketAddr>,
    /// With --bootstrap-token: how often the agent replaces its key (e.g. `30d`, `12h`;
    /// `0`: only when the hub asks, after `fleetpulse-hub key rotate`). The hub accepts the
    /// old key for an overlap, then retires it. A pre-shared key never rotates here.
    #[arg(long, value_name = "PERIOD", env = "FLEETPULSE_ROTATE_KEY_EVERY", default_value = "30d",
          value_parser = crate::rotation::parse_every)]
    pub rotate_key_every: Duration,
}

impl RunArgs {
    /// Reads the key and CA files and builds the agent's options.
    pub fn into_options(self, key: Option<SigningKey>) -> anyhow::Result<AgentOptions> {
        let key = match (key, &self.key_file) {
            (Some(key), _) => key,
            (None, Some(file)) => {
                if self.bootstrap_token.is_some() && !file.exists() {
                    let generated = keys::generate_key_file(file, false)?;
                    tracing::info!(key_id = %generated.key_id, file = %file.display(), "generated the agent key to enrol with");
                }
                keys::read_key_file(file)?
            }
            (None, None) => anyhow::bail!(
                "no --key-file, and no Kubernetes API to keep the key in a Secret: pass \
                 --key-file (see `fleetpulse-agent keygen`) or --kubeconfig"
            ),
        };
        let hub_ca_pem = self
            .hub_ca
            .as_deref()
            .map(tls::read_ca_bundle)
            .transpose()?;
        let opts = AgentOptions {
            hub_ca_pem,
            hub_ca_pin: self.hub_ca_hash,
            audience: self.audience,
            cluster_uid: self.cluster_uid,
            interval: Duration::from_secs(self.interval_seconds),
            allow_insecure_http: self.insecure_http,
            ..AgentOptions::new(self.hub, self.cluster, key)
        };
        opts.validate()?;
        Ok(opts)
    }
}

/// Runs the parsed command line.
pub async fn main(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Keygen(args) => {
            let generated = keys::generate_key_file(&args.out, args.force)?;
            fleetpulse_common::cli::print(&generated.instructions())
        }
        Command::Pubkey(args) => fleetpulse_common::cli::print(&pubkey::run(args).await?),
        Command::Eval(args) => {
            let code = eval::run(args).await;
            std::process::exit(code);
        }
        Command::Run(mut args) => {
            fleetpulse_common::cli::init_logging(cli.log_format, &cli.log_filter)?;
            let engine_options = EngineOptions {
                lua_limits: LuaLimits {
                    deadline: Duration::from_millis(args.lua_deadline_ms),
                    memory_bytes: (args.lua_memory_mib as usize) << 20,
                    ..LuaLimits::default()
                },
                default_period: Duration::from_secs(args.interval_seconds),
                checks_namespace: args.checks_namespace.clone(),
                metrics: AgentMetrics::default(),
                cache: Default::default(),
            };
            let reader = kube_client::reader(args.kubeconfig.as_deref()).await?;
            let mut key = None;
            if let Reader::Kube(kube) = &reader {
                if args.key_file.is_none() {
                    let client = kube.client().clone();
                    key = Some(
                        key_secret::load_or_create(client, &args.agent_namespace, &args.key_secret)
                            .await?
                            .0,
                    );
                }
                if args.cluster_uid.is_empty() {
                    args.cluster_uid = key_secret::cluster_uid(kube.client().clone())
                        .await
                        .unwrap_or_default();
                }
            }
            let listener = match args.listen {
                Some(addr) => Some(
                    tokio::net::TcpListener::bind(addr)
                        .await
                        .with_context(|| format!("cannot listen on --listen {addr}"))?,
                ),
                None => None,
            };
            let metrics = engine_options.metrics.clone();
            let token = args.bootstrap_token.clone();
            // Only a key enrolled with a token rotates; it lives in the file or the Secret.
            let store = match (&args.key_file, &reader) {
                (Some(file), _) => Some(KeyStore::File(file.clone())),
                (None, Reader::Kube(kube)) => Some(KeyStore::Secret(KeySecret {
                    client: kube.client().clone(),
                    namespace: args.agent_namespace.clone(),
                    name: args.key_secret.clone(),
                })),
                (None, _) => None,
            };
            let rotation =
                (token.is_some().then_some(store).flatten()).map(|store| RotationSettings {
                    every: args.rotate_key_every,
                    store,
                });
            let mut opts = args.into_options(key)?;
            opts.rotation = rotation;
            let shutdown = CancellationToken::new();
            signals::cancel_on_signal(shutdown.clone()).context("cannot listen for SIGTERM")?;
            if let Some(token) = token {
                crate::enrol::enrol(&opts, &token, &shutdown).await?;
            }
            let checks: Arc<dyn ChecksSource> =
                Arc::new(CheckEngine::spawn(reader, engine_options, shutdown.clone()));
            opts.checks = checks.clone();
            opts.metrics = metrics.clone();
            let agent = crate::spawn(opts)?;
            if let Some(listener) = listener {
                let addr = listener.local_addr()?;
                tracing::info!(%addr, "listening: /healthz, /readyz, /metrics");
                let endpoint = Endpoint {
                    status: agent.watch(),
                    checks,
                    metrics,
                };
                tokio::spawn(serve::serve(listener, endpoint, shutdown.clone()));
            }
            shutdown.cancelled().await;
            agent.stop().await?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;

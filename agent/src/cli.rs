//! The command line: `keygen` writes a key and says what to put on the hub; `run` sends
//! heartbeats until SIGTERM or Ctrl-C. Every flag can also be set by an environment
//! variable (`FLEETPULSE_...`), which is how the Helm chart configures the agent.

mod logging;
mod signals;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use fleetpulse_common::protocol::report::ClusterId;
use tokio_util::sync::CancellationToken;

use crate::options::{AgentOptions, DEFAULT_AUDIENCE};
use crate::{Url, keys, tls};

pub use logging::LogFormat;

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
    /// The cluster's private key (from `fleetpulse-agent keygen`).
    #[arg(long, value_name = "FILE", env = "FLEETPULSE_KEY_FILE")]
    pub key_file: PathBuf,
    /// PEM bundle of the CA(s) that signed the hub's certificate; only these are trusted.
    /// Without it the system roots are.
    #[arg(long, value_name = "FILE", env = "FLEETPULSE_HUB_CA")]
    pub hub_ca: Option<PathBuf>,
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
}

impl RunArgs {
    /// Reads the key and CA files and builds the agent's options.
    pub fn into_options(self) -> Result<AgentOptions, crate::AgentError> {
        let key = keys::read_key_file(&self.key_file)?;
        let hub_ca_pem = self
            .hub_ca
            .as_deref()
            .map(tls::read_ca_bundle)
            .transpose()?;
        let opts = AgentOptions {
            hub_ca_pem,
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
            print!("{}", generated.instructions());
            Ok(())
        }
        Command::Run(args) => {
            logging::init(cli.log_format, &cli.log_filter)?;
            let opts = args.into_options()?;
            let shutdown = CancellationToken::new();
            signals::cancel_on_signal(shutdown.clone()).context("cannot listen for SIGTERM")?;
            crate::run(opts, shutdown).await?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_has_an_environment_variable() {
        let cli = Cli::command();
        let mut commands = vec![&cli];
        commands.extend(cli.get_subcommands());
        for cmd in commands {
            for arg in cmd.get_arguments().filter(|a| a.get_long().is_some()) {
                if matches!(arg.get_id().as_str(), "help" | "version") {
                    continue;
                }
                let env = arg
                    .get_env()
                    .unwrap_or_else(|| panic!("--{} has no env", arg.get_id()));
                assert!(env.to_str().unwrap().starts_with("FLEETPULSE_"), "{env:?}");
            }
        }
    }

    #[test]
    fn run_flags_parse_with_their_defaults() {
        let cli = Cli::try_parse_from([
            "fleetpulse-agent",
            "run",
            "--hub",
            "https://hub.example",
            "--cluster",
            "fleet/edge-1",
            "--key-file",
            "/keys/agent.pem",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.cluster, ClusterId::new("fleet", "edge-1"));
        assert_eq!(
            (run.audience.as_str(), run.interval_seconds),
            ("fleetpulse", 10)
        );
        assert!(!run.insecure_http && run.hub_ca.is_none() && run.cluster_uid.is_empty());
    }

    #[test]
    fn malformed_cluster_and_zero_interval_are_refused_by_the_parser() {
        let base = [
            "fleetpulse-agent",
            "run",
            "--hub",
            "https://h",
            "--key-file",
            "k",
        ];
        let with = |extra: &[&str]| Cli::try_parse_from(base.iter().chain(extra)).map(|_| ());
        assert!(with(&["--cluster", "no-namespace"]).is_err());
        assert!(with(&["--cluster", "a/b", "--interval-seconds", "0"]).is_err());
        assert!(with(&["--cluster", "a/b"]).is_ok());
    }

    #[test]
    fn http_hub_is_refused_without_insecure_http() {
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("agent.pem");
        keys::generate_key_file(&key_file, false).unwrap();
        let args = |insecure: bool| RunArgs {
            hub: Url::parse("http://hub.example").unwrap(),
            cluster: ClusterId::new("fleet", "edge-1"),
            key_file: key_file.clone(),
            hub_ca: None,
            audience: DEFAULT_AUDIENCE.into(),
            cluster_uid: String::new(),
            interval_seconds: 10,
            insecure_http: insecure,
        };
        let err = args(false).into_options().unwrap_err();
        assert!(err.to_string().contains("--insecure-http"), "{err}");
        assert!(args(true).into_options().unwrap().allow_insecure_http);
    }
}

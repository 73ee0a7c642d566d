//! Command-line interface of the `kubesim` binary.

use clap::Parser;
use std::{net::SocketAddr, path::PathBuf};

/// Serve one simulated Kubernetes cluster over plain HTTP until SIGTERM or Ctrl-C.
///
/// Writes a kubeconfig pointing at the server (no auth) so any kube client, including
/// fleetpulse binaries, can talk to it: `KUBECONFIG=<file> fleetpulse-agent ...`.
#[derive(Debug, Clone, Parser)]
#[command(name = "kubesim", version, about, long_about)]
pub struct Cli {
    /// Address to listen on; port 0 picks a free port (the kubeconfig has the real one).
    #[arg(long, env = "KUBESIM_LISTEN", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,

    /// Where to write the kubeconfig for the served cluster.
    #[arg(long, env = "KUBESIM_KUBECONFIG_OUT")]
    pub kubeconfig_out: PathBuf,

    /// Number of Ready nodes to create at start (named node-1..node-N).
    #[arg(long, env = "KUBESIM_NODES", default_value_t = 3)]
    pub nodes: usize,

    /// Emit logs as JSON lines instead of human-readable text.
    #[arg(long, env = "KUBESIM_LOG_JSON")]
    pub log_json: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn nodes_default_to_three() {
        let cli = Cli::try_parse_from(["kubesim", "--kubeconfig-out", "k.yaml"]).unwrap();
        assert_eq!(cli.nodes, 3);
    }
}

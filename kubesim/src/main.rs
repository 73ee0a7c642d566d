//! `kubesim` binary: serves one simulated cluster and writes its kubeconfig.
#![forbid(unsafe_code)]

mod cli;

use anyhow::Context;
use clap::Parser;
use fleetpulse_kubesim::{KubeSim, kubeconfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt().with_env_filter(filter);
    if cli.log_json {
        fmt.json().init()
    } else {
        fmt.init()
    }

    let sim = KubeSim::builder().nodes(cli.nodes).build();
    let (addr, server) = sim
        .serve(cli.listen)
        .await
        .context("binding the listen address")?;
    let config = kubeconfig(&format!("http://{addr}"));
    // Write then rename, so a reader polling for the file never sees it half-written.
    let tmp = cli.kubeconfig_out.with_extension("tmp");
    tokio::fs::write(&tmp, config)
        .await
        .with_context(|| format!("writing kubeconfig to {}", tmp.display()))?;
    tokio::fs::rename(&tmp, &cli.kubeconfig_out)
        .await
        .with_context(|| format!("moving kubeconfig to {}", cli.kubeconfig_out.display()))?;
    tracing::info!(%addr, kubeconfig = %cli.kubeconfig_out.display(), nodes = cli.nodes, "kubesim serving");

    shutdown_signal().await;
    tracing::info!("shutting down");
    server.abort();
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

//! `loadgen`: simulated agents send signed heartbeats to a real `fleetpulse-hub`; the last
//! line of its output compares the hub's CPU time per accepted heartbeat with one core's
//! signature-verification rate. See docs/performance.md.
#![forbid(unsafe_code)]

use clap::Parser;

use fleetpulse_tests::loadgen::{self, Args};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(pods) = args.agent_footprint {
        return loadgen::run_agent_footprint(&args, pods).await;
    }
    let run = loadgen::run(args).await?;
    if run.rejected + run.failed > 0 {
        eprintln!(
            "loadgen: {} heartbeats were refused and {} got no answer; see the refusals above",
            run.rejected, run.failed
        );
        std::process::exit(1);
    }
    Ok(())
}

//! `loadgen`: simulated agents send signed heartbeats to a real `fleetpulse-hub`; the last
//! line of its output compares the hub's CPU time per accepted heartbeat with one core's
//! signature-verification rate. With `--real-agents N`, N real `fleetpulse-agent`
//! processes report instead and the last line gives their round trips; with
//! `--replicas 1,2,3`, hub replicas sharing the fleet take it, each count in turn. See
//! docs/performance.md.
#![forbid(unsafe_code)]

use clap::Parser;

use fleetpulse_tests::loadgen::{self, Args};

/// How many heap allocations the calling thread makes while `f` runs: `allocation_counter`
/// is this binary's global allocator (counting per thread, allocating through the system's
/// malloc), and `allocs_per_hb` comes from it.
fn count_allocations(f: &mut dyn FnMut()) -> u64 {
    allocation_counter::measure(f).count_total
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(pods) = args.agent_footprint {
        return loadgen::run_agent_footprint(&args, pods).await;
    }
    if let Some(agents) = args.real_agents {
        let run = loadgen::real_agents::run(&args, agents as usize).await?;
        if let Some(problem) = run.problem() {
            eprintln!("loadgen: {problem}; see the figures above");
            std::process::exit(1);
        }
        return Ok(());
    }
    if !args.replicas.is_empty() {
        let counts: Vec<usize> = args.replicas.iter().map(|&n| n as usize).collect();
        return loadgen::replicas::run(&args, &counts).await;
    }
    let run = loadgen::run(args, Some(count_allocations)).await?;
    if run.rejected + run.failed > 0 {
        eprintln!(
            "loadgen: {} heartbeats were refused and {} got no answer; see the refusals above",
            run.rejected, run.failed
        );
        std::process::exit(1);
    }
    Ok(())
}

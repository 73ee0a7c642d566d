//! `detection-sim`: the failure-detection simulator (docs/detection.md). Prints one line
//! per profile × detector and, on stderr, how long each took.

use std::time::Instant;

use clap::Parser;
use fleetpulse_tests::detection_sim::{self, DetectorChoice, Pacing, Profile, Run, Schedule};

/// Simulates clusters over virtual time with the hub's real detector and the agent's real
/// retry schedule, under impairment profiles, and prints false verdicts and detection
/// times. Each cluster lives `--hours` and then dies; a full default run is 10^6
/// cluster-hours per line.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Clusters per line (each one death measured).
    #[arg(long, env = "DETECTION_SIM_CLUSTERS", default_value_t = 1000)]
    clusters: u32,
    /// Hours each cluster lives before it dies.
    #[arg(long, env = "DETECTION_SIM_HOURS", default_value_t = 1000.0)]
    hours: f64,
    /// Profiles, comma separated; parts combine with `+` (clean, jitter30, loss5, burst,
    /// stalls, hub-restart). Default: each part and the hard combinations.
    #[arg(long, env = "DETECTION_SIM_PROFILES", value_delimiter = ',')]
    profiles: Vec<String>,
    /// Detectors, comma separated: `fixed`, `phi` (threshold 4) or `phiN`.
    #[arg(
        long,
        env = "DETECTION_SIM_DETECTORS",
        value_delimiter = ',',
        default_value = "fixed,phi"
    )]
    detectors: Vec<String>,
    /// Heartbeat interval, seconds.
    #[arg(long, env = "DETECTION_SIM_INTERVAL", default_value_t = 10)]
    interval_seconds: u32,
    /// Grace period, seconds.
    #[arg(long, env = "DETECTION_SIM_GRACE", default_value_t = 40)]
    grace_seconds: u32,
    /// The hub's detector tick, seconds.
    #[arg(long, env = "DETECTION_SIM_TICK", default_value_t = 1.0)]
    tick_seconds: f64,
    /// Random seed.
    #[arg(long, env = "DETECTION_SIM_SEED", default_value_t = 1)]
    seed: u64,
    /// The agents' retry schedule: `agent` (the agent's own) or `legacy` (the one it had
    /// before, for comparison).
    #[arg(long, env = "DETECTION_SIM_SCHEDULE", default_value = "agent", value_parser = ["agent", "legacy"])]
    schedule: String,
    /// With `--schedule agent`: the request timeout as a share of the interval instead of
    /// the agent's.
    #[arg(long, env = "DETECTION_SIM_TIMEOUT_SHARE")]
    timeout_share: Option<f64>,
    /// With `--schedule agent`: the backoff cap as a share of the interval instead of the
    /// agent's.
    #[arg(long, env = "DETECTION_SIM_CAP_SHARE")]
    cap_share: Option<f64>,
    /// When the agents send after an accepted heartbeat: `sent` (one interval after the
    /// accepted attempt was sent, the agent's) or `answer` (one interval after its answer,
    /// what the agent did before, for comparison).
    #[arg(long, env = "DETECTION_SIM_PACE_FROM", default_value = "sent", value_parser = ["sent", "answer"])]
    pace_from: String,
    /// Whether the agents hedge a retry left unanswered (`on`, the agent's) or send one
    /// request at a time (`off`, what the agent did before, for comparison).
    #[arg(long, env = "DETECTION_SIM_HEDGE", default_value = "on", value_parser = ["on", "off"])]
    hedge: String,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.grace_seconds > args.interval_seconds,
        "--grace-seconds ({}) must be longer than --interval-seconds ({})",
        args.grace_seconds,
        args.interval_seconds
    );
    let names: Vec<String> = if args.profiles.is_empty() {
        detection_sim::profile::DEFAULT_PROFILES
            .iter()
            .map(|p| (*p).to_owned())
            .collect()
    } else {
        args.profiles.clone()
    };
    let profiles = names
        .iter()
        .map(|n| Profile::parse(n))
        .collect::<Result<Vec<_>, _>>()?;
    let detectors = args
        .detectors
        .iter()
        .map(|d| DetectorChoice::parse(d))
        .collect::<Result<Vec<_>, _>>()?;
    let run = Run {
        clusters: args.clusters,
        hours: args.hours,
        interval_seconds: args.interval_seconds,
        grace_seconds: args.grace_seconds,
        tick_seconds: args.tick_seconds,
        seed: args.seed,
        schedule: if args.schedule == "legacy" {
            Schedule::Legacy
        } else {
            Schedule::Agent {
                timeout_share: args.timeout_share,
                cap_share: args.cap_share,
            }
        },
        pacing: if args.pace_from == "answer" {
            Pacing::FromAnswer
        } else {
            Pacing::FromSend
        },
        hedge: args.hedge == "on",
    };
    eprintln!(
        "{}",
        run.schedule.describe(f64::from(args.interval_seconds))
    );
    let total = Instant::now();
    for profile in &profiles {
        for detector in &detectors {
            let started = Instant::now();
            let out = detection_sim::simulate(profile, detector, run);
            println!("{out}");
            eprintln!(
                "  {:.1} s wall, {} heartbeats accepted, {} requests",
                started.elapsed().as_secs_f64(),
                out.accepted,
                out.attempts
            );
        }
    }
    eprintln!("total {:.1} s wall", total.elapsed().as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Args::command().debug_assert();
    }
}

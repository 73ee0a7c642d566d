//! `soak`: the real hub and agents through fault-injecting proxies for a bounded time
//! (docs/detection.md). Prints one line of figures at the end.

use std::time::Duration;

use clap::Parser;
use fleetpulse_tests::fault_proxy::scenario::Binaries;
use fleetpulse_tests::fault_proxy::soak::{self, SoakSettings};

/// Runs `fleetpulse-hub serve` and one `fleetpulse-agent run` per cluster, each agent
/// behind its own loopback proxy that delays with jitter and fails a share of requests,
/// and blackholes one cluster at a time now and then (and, between, wedges one cluster's
/// open connections, which must cost no verdict). Reports false unreachable verdicts
/// and how fast each blackhole was detected. Build the workspace first; the binaries are
/// taken from beside this one.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// How long to run: a number with `s`, `m` or `h` (`90s`, `10m`, `1h`). At most 24h.
    #[arg(long, env = "SOAK_DURATION", default_value = "10m", value_parser = parse_duration)]
    duration: Duration,
    /// Clusters, each with its own agent and proxy.
    #[arg(long, env = "SOAK_CLUSTERS", default_value_t = 4)]
    clusters: usize,
    /// Heartbeat interval, seconds.
    #[arg(long, env = "SOAK_INTERVAL", default_value_t = 1)]
    interval_seconds: u32,
    /// Grace period, seconds.
    #[arg(long, env = "SOAK_GRACE", default_value_t = 5)]
    grace_seconds: u32,
    /// Time between blackholes (one cluster at a time), same format as --duration.
    #[arg(long, env = "SOAK_BLACKHOLE_EVERY", default_value = "2m", value_parser = parse_duration)]
    blackhole_every: Duration,
    /// One-way delay in milliseconds; each chunk varies by as much either way.
    #[arg(long, env = "SOAK_DELAY_MS", default_value_t = 150)]
    delay_ms: u64,
    /// Percent of requests that fail (their connection is reset).
    #[arg(long, env = "SOAK_FAIL_PERCENT", default_value_t = 5.0)]
    fail_percent: f64,
    /// Time between wedges of one cluster's open connections (they die silently; new
    /// ones get through), same format as --duration, or `off`.
    #[arg(long, env = "SOAK_WEDGE_EVERY", default_value = "1m", value_parser = parse_optional_duration)]
    wedge_every: Every,
}

/// A period, or `off`.
#[derive(Clone, Copy, Debug)]
struct Every(Option<Duration>);

fn parse_optional_duration(s: &str) -> Result<Every, String> {
    if s == "off" {
        return Ok(Every(None));
    }
    parse_duration(s).map(|d| Every(Some(d)))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (number, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{s}` is not a duration; write e.g. 90s, 10m or 1h"))?;
    let secs = match unit {
        "s" | "" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("`{s}`: the unit must be s, m or h")),
    };
    if secs == 0 || secs > 24 * 3600 {
        return Err(format!("`{s}` must be between 1s and 24h"));
    }
    Ok(Duration::from_secs(secs))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.clusters >= 1 && args.clusters <= 64,
        "--clusters must be between 1 and 64"
    );
    anyhow::ensure!(
        (0.0..100.0).contains(&args.fail_percent),
        "--fail-percent must be at least 0 and below 100"
    );
    let bins = Binaries::beside_this_executable()?;
    let report = soak::run(
        &bins,
        SoakSettings {
            duration: args.duration,
            clusters: args.clusters,
            interval: args.interval_seconds,
            grace: args.grace_seconds,
            blackhole_every: args.blackhole_every,
            delay: Duration::from_millis(args.delay_ms),
            drop: args.fail_percent / 100.0,
            wedge_every: args.wedge_every.0,
        },
    )
    .await?;
    println!("{report}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed_and_durations_parse() {
        Args::command().debug_assert();
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("2d").is_err());
        assert!(parse_duration("25h").is_err());
        let defaults = Args::try_parse_from(["soak"]).unwrap();
        assert_eq!(defaults.wedge_every.0, Some(Duration::from_secs(60)));
        let off = Args::try_parse_from(["soak", "--wedge-every", "off"]).unwrap();
        assert_eq!(off.wedge_every.0, None);
        assert!(Args::try_parse_from(["soak", "--wedge-every", "never"]).is_err());
    }
}

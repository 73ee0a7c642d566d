//! The load generator against the real hub binary, briefly: every heartbeat is accepted and
//! the last line is the machine-readable summary (the stack's figures measured), with simulated agents and with real
//! agent processes. No figure is asserted (performance is measured by the tool, see
//! docs/performance.md, not by tests).

use std::process::{Command, Output, Stdio};

use fleetpulse_tests::loadgen::stats::FinalLine;
use fleetpulse_tests::process;

fn loadgen(batch_verify: bool) -> anyhow::Result<Output> {
    let hub = process::binary("fleetpulse-hub")?;
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["--clusters", "50", "--interval-seconds", "1"])
        .args(["--duration-seconds", "3", "--warmup-rounds", "1"])
        .args(["--verify-seconds", "0.2", "--connections", "2"])
        // One sitting of the stack (a floor phase, a batched signature) for the strict
        // run, two (another heartbeat phase, floor and batch) for the batched one.
        .args(["--stack-sittings", if batch_verify { "2" } else { "1" }])
        .arg("--hub-bin")
        .arg(hub)
        // The strict run also starts the hub through `taskset`, as the documented runs do.
        .args(if batch_verify {
            &[][..]
        } else {
            &["--hub-cpus", "0"][..]
        })
        .env(
            "FLEETPULSE_BATCH_VERIFY",
            if batch_verify { "true" } else { "false" },
        )
        .stdin(Stdio::null())
        .output()?;
    Ok(out)
}

fn assert_all_accepted(out: &Output) -> anyhow::Result<FinalLine> {
    let stdout = String::from_utf8(out.stdout.clone())?;
    anyhow::ensure!(
        out.status.success(),
        "loadgen failed with {}:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.lines().any(|l| l == "rejected=0 failed=0"),
        "some heartbeats were refused:\n{stdout}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    let line = FinalLine::parse(last)?;
    assert_eq!(line.clusters, 50);
    assert!(line.accepted_per_s > 0.0, "{last}");
    let stack = line.stack;
    for figure in [stack.floor_us, stack.batch_sig_us, stack.hb_us] {
        assert!(figure > 0.0 && figure.is_finite(), "{last}");
    }
    Ok(line)
}

#[test]
fn fifty_clusters_are_all_accepted_and_the_last_line_parses() -> anyhow::Result<()> {
    assert_all_accepted(&loadgen(false)?)?;
    Ok(())
}

#[test]
fn with_batch_verification_every_heartbeat_is_still_accepted() -> anyhow::Result<()> {
    assert_all_accepted(&loadgen(true)?)?;
    Ok(())
}

/// The `key=value` fields of a line.
fn fields(line: &str) -> std::collections::HashMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .collect()
}

#[test]
fn real_agents_beside_hostile_clients_are_accepted_and_their_round_trips_counted()
-> anyhow::Result<()> {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["--real-agents", "2", "--interval-seconds", "2"])
        .args(["--duration-seconds", "4", "--warmup-rounds", "1"])
        .args(["--slow-connections", "3", "--bad-signature-burst", "10"])
        .args(["--bad-signature-every-seconds", "1"])
        .arg("--hub-bin")
        .arg(process::binary("fleetpulse-hub")?)
        .arg("--agent-bin")
        .arg(process::binary("fleetpulse-agent")?)
        .stdin(Stdio::null())
        .output()?;
    let stdout = String::from_utf8(out.stdout)?;
    anyhow::ensure!(
        out.status.success(),
        "loadgen --real-agents failed with {}:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    let f = fields(last);
    let number = |key: &str| -> u64 {
        f.get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no number {key}= in the last line:\n{stdout}"))
    };
    assert_eq!(number("real_agents"), 2, "{stdout}");
    assert_eq!(number("failed"), 0, "{stdout}");
    assert_eq!(number("reachable"), 2, "{stdout}");
    // Each agent sends about one heartbeat per 2 s window; the hub counted them too.
    assert!(number("sent") >= 2, "{stdout}");
    assert!(number("hub_accepted") >= 2, "{stdout}");
    assert!(number("round_trips") >= 2, "{stdout}");
    let p99 = f.get("p99_le_ms").copied().unwrap_or_default();
    assert!(
        p99 == "inf" || p99.parse::<f64>().is_ok_and(|ms| ms > 0.0),
        "p99_le_ms={p99}:\n{stdout}"
    );
    assert!(
        stdout.contains("hostile: slow_opened=") && stdout.contains("bad_signature_sent="),
        "{stdout}"
    );
    Ok(())
}

#[test]
fn agent_footprint_counts_the_member_api_load_and_a_watched_check_lists_nothing_per_round()
-> anyhow::Result<()> {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["--agent-footprint", "50", "--interval-seconds", "1"])
        .args(["--agent-seconds", "4"])
        .arg("--hub-bin")
        .arg(process::binary("fleetpulse-hub")?)
        .stdin(Stdio::null())
        .output()?;
    let stdout = String::from_utf8(out.stdout)?;
    anyhow::ensure!(
        out.status.success(),
        "loadgen --agent-footprint failed with {}:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let busy = (stdout.lines())
        .find(|l| l.starts_with("agent with a Lua check"))
        .unwrap_or_else(|| panic!("no busy line:\n{stdout}"));
    let f = fields(busy);
    let number = |key: &str| -> f64 {
        f.get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no number {key}= in the busy line:\n{stdout}"))
    };
    assert!(number("rss_max_mib") > 0.0, "{stdout}");
    // Listing every round would be at least one request a round; the agent's cache was
    // filled before the phase and only watches.
    let requests = number("member_api_requests_per_round");
    assert!(requests < 0.5, "{stdout}");
    assert!(number("member_api_bytes_per_round") >= 0.0, "{stdout}");
    Ok(())
}

#[test]
fn replicas_sharing_the_fleet_take_every_heartbeat_of_their_shards() -> anyhow::Result<()> {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "--replicas",
            "1,2",
            "--clusters",
            "40",
            "--interval-seconds",
            "1",
        ])
        .args(["--duration-seconds", "2", "--warmup-rounds", "1"])
        .stdin(Stdio::null())
        .output()?;
    let stdout = String::from_utf8(out.stdout)?;
    anyhow::ensure!(
        out.status.success(),
        "loadgen --replicas failed with {}:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<_> = (stdout.lines())
        .filter(|l| l.starts_with("replicas: "))
        .map(fields)
        .collect();
    assert_eq!(runs.len(), 2, "one line per replica count:\n{stdout}");
    for (run, n) in runs.iter().zip(["1", "2"]) {
        assert_eq!(run["replicas"], n, "{stdout}");
        assert_eq!(run["refused"], "0", "{stdout}");
        let cpu: f64 = run["hub_cpu_us_per_hb"].parse()?;
        assert!(cpu > 0.0 && cpu.is_finite(), "{stdout}");
    }
    // With two replicas, each took the heartbeats of the clusters of its own shards.
    let owned: Vec<usize> = (stdout.lines())
        .filter(|l| l.starts_with("replica: replicas=2 "))
        .map(|l| fields(l)["clusters"].parse())
        .collect::<Result<_, _>>()?;
    assert!(
        owned.len() == 2 && owned.iter().all(|&c| c > 0) && owned.iter().sum::<usize>() == 40,
        "{owned:?}:\n{stdout}"
    );
    Ok(())
}

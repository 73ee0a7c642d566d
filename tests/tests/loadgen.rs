//! The load generator against the real hub binary, briefly: every heartbeat is accepted and
//! the last line is the machine-readable summary. No figure is asserted (performance is
//! measured by the tool, see docs/performance.md, not by tests).

use std::process::{Command, Output, Stdio};

use fleetpulse_tests::loadgen::stats::FinalLine;
use fleetpulse_tests::process;

fn loadgen(batch_verify: bool) -> anyhow::Result<Output> {
    let hub = process::binary("fleetpulse-hub")?;
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["--clusters", "50", "--interval-seconds", "1"])
        .args(["--duration-seconds", "3", "--warmup-rounds", "1"])
        .args(["--verify-seconds", "0.2", "--connections", "2"])
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

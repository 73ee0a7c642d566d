//! The README's first command keeps working: the demo runs the whole loop, a deployment
//! tool follows both failovers, and it exits 0.

use std::process::Command;

#[test]
fn the_demo_fails_over_twice_and_exits_cleanly() {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetpulse-demo"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("LivenessChecksFailing"), "{stdout}");
    assert!(stdout.contains("Unreachable"), "{stdout}");
    assert!(
        stdout.contains("Summary: 3 clusters, 2 faults, 2 failovers"),
        "{stdout}"
    );
    // The deployment tool follows: the ApplicationSet's target at the start and after each
    // failover are three different clusters.
    let first = stdout
        .lines()
        .find_map(|l| l.split_once("deploys to: ").map(|(_, c)| c.trim()))
        .unwrap_or_else(|| panic!("no first target: {stdout}"));
    let moves: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once("it deploys to ").map(|(_, c)| c))
        .filter_map(|c| c.split_whitespace().next())
        .collect();
    assert_eq!(moves.len(), 2, "{stdout}");
    assert!(
        first != moves[0] && moves[0] != moves[1] && first != moves[1],
        "{stdout}"
    );
}

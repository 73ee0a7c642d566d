//! The README's first command keeps working: the demo runs the whole loop and exits 0.

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
}

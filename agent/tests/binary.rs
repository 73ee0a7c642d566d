//! The `fleetpulse-agent` binary as an operator meets it. (These tests also make
//! `cargo test --workspace` build the binary, which `fleetpulse-tests` runs end to end.)

use std::process::Command;

fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fleetpulse-agent"))
}

#[test]
fn keygen_writes_a_key_whose_printed_public_half_parses() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("edge.pem");
    let out = agent()
        .args(["keygen", "--out"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let public = stdout
        .lines()
        .find_map(|l| l.strip_prefix("public key:"))
        .unwrap()
        .trim();
    let parsed = fleetpulse_common::protocol::keys::parse_public_key(public).unwrap();
    let pem = std::fs::read_to_string(&key).unwrap();
    let signing = fleetpulse_common::protocol::keys::from_pem(&pem).unwrap();
    assert_eq!(signing.verifying_key(), *parsed);
}

#[test]
fn run_against_a_plain_http_hub_without_the_flag_fails_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("edge.pem");
    assert!(
        agent()
            .args(["keygen", "--out"])
            .arg(&key)
            .output()
            .unwrap()
            .status
            .success()
    );
    let out = agent()
        .args([
            "run",
            "--hub",
            "http://127.0.0.1:9",
            "--cluster",
            "fleet/edge",
            "--key-file",
        ])
        .arg(&key)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--insecure-http"), "{stderr}");
}

#[test]
fn run_without_a_key_file_or_a_cluster_says_how_to_give_it_a_key() {
    let out = agent()
        .args([
            "run",
            "--hub",
            "https://127.0.0.1:9",
            "--cluster",
            "fleet/edge",
        ])
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--key-file") && stderr.contains("--kubeconfig"),
        "{stderr}"
    );
}

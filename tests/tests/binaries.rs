//! The real binaries, as an operator runs them: `fleetpulse-agent keygen`, `fleetpulse-hub
//! serve` over HTTPS, `fleetpulse-agent run`, `fleetpulse-hub get`, and a graceful SIGTERM.

use std::time::Duration;

use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, Status};
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_tests::embedded_hub::EmbeddedHub;
use fleetpulse_tests::fleet::condition_of;
use fleetpulse_tests::pki::Pki;
use fleetpulse_tests::process::{self, Running};
use fleetpulse_tests::wait::blocking_until;

#[test]
fn keygen_serve_run_get_and_a_graceful_stop_with_the_real_binaries() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = |p: &str| dir.path().join(p).display().to_string();
    let pki = Pki::generate(dir.path())?;
    let ca = pki.ca_cert.display().to_string();

    let keygen = process::run("fleetpulse-agent", &["keygen", "--out", &path("edge.pem")])?;
    let printed = String::from_utf8(keygen.stdout)?;
    let public_key = printed
        .lines()
        .find_map(|l| l.strip_prefix("public key:"))
        .map(str::trim)
        .ok_or_else(|| anyhow::anyhow!("keygen printed no public key: {printed}"))?
        .to_owned();
    std::fs::create_dir_all(path("manifests"))?;
    std::fs::write(
        path("manifests/edge.yaml"),
        format!(
            "apiVersion: fleetpulse.io/v1alpha1\nkind: MemberCluster\nmetadata: {{name: edge, namespace: fleet}}\n\
             spec:\n  heartbeat: {{intervalSeconds: 1, gracePeriodSeconds: 3}}\n  agent:\n    publicKeys:\n      - publicKey: {public_key}\n"
        ),
    )?;

    let mut hub = EmbeddedHub::spawn(
        &dir.path().join("manifests"),
        &dir.path().join("data"),
        &pki,
        &[],
    )?;
    let server = hub.server.clone();
    blocking_until(
        "the hub to serve its read API",
        Duration::from_secs(20),
        || hub.clusters().is_some(),
    )?;

    let mut agent = Running::spawn(
        "fleetpulse-agent",
        &[
            "run",
            "--hub",
            &server,
            "--cluster",
            "fleet/edge",
            "--key-file",
            &path("edge.pem"),
            "--hub-ca",
            &ca,
            "--interval-seconds",
            "1",
        ],
    )?;
    let id = ClusterId::new("fleet", "edge");
    blocking_until("the cluster Healthy", Duration::from_secs(20), || {
        hub.clusters()
            .is_some_and(|mcs| condition_of(&mcs, &id, HEALTHY) == Status::True)
    })?;
    let table = String::from_utf8(
        process::run(
            "fleetpulse-hub",
            &["get", "mc", "--server", &hub.admin, "--ca", &ca],
        )?
        .stdout,
    )?;
    let row = table
        .lines()
        .find(|l| l.contains("edge"))
        .unwrap_or_default();
    assert_eq!(
        row.split_whitespace().take(5).collect::<Vec<_>>(),
        ["fleet", "edge", "True", "True", "True"],
        "{table}"
    );

    assert!(
        agent.terminate(Duration::from_secs(10))?,
        "the agent exits cleanly on SIGTERM"
    );
    blocking_until("the cluster unreachable", Duration::from_secs(10), || {
        hub.clusters()
            .is_some_and(|mcs| condition_of(&mcs, &id, REACHABLE) == Status::False)
    })?;
    assert!(
        hub.process.terminate(Duration::from_secs(10))?,
        "the hub exits cleanly on SIGTERM"
    );
    Ok(())
}

#[test]
fn crds_subcommand_prints_the_generated_crds() -> anyhow::Result<()> {
    let out = process::run("fleetpulse-hub", &["crds"])?;
    assert_eq!(
        String::from_utf8(out.stdout)?,
        fleetpulse_common::api::crds::to_yaml()
    );
    Ok(())
}

#[test]
fn the_hub_refuses_to_serve_plain_http_without_the_development_flag() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = std::process::Command::new(process::binary("fleetpulse-hub")?)
        .args([
            "serve",
            "--manifests",
            &dir.path().display().to_string(),
            "--data",
            &dir.path().join("d").display().to_string(),
        ])
        .output()?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--insecure-http") && stderr.contains("--tls-cert"),
        "{stderr}"
    );
    Ok(())
}

//! The verdicts stay safe against the real binaries: a cluster is never Ready on a report
//! made before its agent pulled its checks, a manifest that fails to load at a restart
//! does not make its clusters vanish, and an agent whose clock is off can pull its checks
//! exactly when its heartbeats are accepted (never reported on while running none).

use std::path::Path;
use std::time::Duration;

use fleetpulse_common::api::condition::{HEALTHY, READY, Status};
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_tests::embedded_hub::EmbeddedHub;
use fleetpulse_tests::fleet::{condition_of, write_clusters};
use fleetpulse_tests::hand_agent::HandAgent;
use fleetpulse_tests::loadgen::client::{Transport, client};
use fleetpulse_tests::pki::Pki;
use fleetpulse_tests::process::{self, Running};
use fleetpulse_tests::wait::blocking_until;

const DEADLINE: Duration = Duration::from_secs(30);

/// `fleetpulse-agent keygen` into `dir/NAME.pem`; the printed public key.
fn keygen(dir: &Path, name: &str) -> anyhow::Result<String> {
    let out = dir.join(format!("{name}.pem")).display().to_string();
    let printed =
        String::from_utf8(process::run("fleetpulse-agent", &["keygen", "--out", &out])?.stdout)?;
    printed
        .lines()
        .find_map(|l| l.strip_prefix("public key:"))
        .map(|k| k.trim().to_owned())
        .ok_or_else(|| anyhow::anyhow!("keygen printed no public key: {printed}"))
}

fn member_cluster(name: &str, public_key: &str, readiness: &str) -> String {
    format!(
        "apiVersion: fleetpulse.io/v1alpha1\nkind: MemberCluster\nmetadata: {{name: {name}, namespace: fleet}}\n\
         spec:\n  heartbeat: {{intervalSeconds: 1, gracePeriodSeconds: 4}}\n  agent:\n    publicKeys:\n      \
         - publicKey: {public_key}\n{readiness}"
    )
}

fn agent(dir: &Path, hub: &EmbeddedHub, name: &str) -> anyhow::Result<Running> {
    hub.agent(
        name,
        &format!("fleet/{name}"),
        &dir.join(format!("{name}.pem")),
    )
}

#[test]
fn a_cluster_whose_readiness_check_fails_is_never_ready_not_even_on_its_first_report()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pki = Pki::generate(dir.path())?;
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests)?;
    let key = keygen(dir.path(), "edge")?;
    // A TCP readiness check against a port nothing listens on (bound, then closed).
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let readiness = format!(
        "  readinessChecks:\n    - name: gateway\n      tcp: {{host: 127.0.0.1, port: {closed}}}\n"
    );
    std::fs::write(
        manifests.join("edge.yaml"),
        member_cluster("edge", &key, &readiness),
    )?;
    let hub = EmbeddedHub::spawn(&manifests, &dir.path().join("data"), &pki, &[])?;
    let _agent = agent(dir.path(), &hub, "edge")?;
    let id = ClusterId::new("fleet", "edge");
    let mut seen = Vec::new();
    // Until the agent reports the check's own verdict, every state seen must be not Ready.
    blocking_until("the gateway check's result on the hub", DEADLINE, || {
        let Some(clusters) = hub.clusters() else {
            return false;
        };
        seen.push(condition_of(&clusters, &id, READY));
        clusters.iter().any(|mc| {
            mc.status.as_ref().is_some_and(|s| {
                s.checks
                    .iter()
                    .any(|c| c.name == "gateway" && !c.passing && c.message != "not run yet")
            })
        })
    })?;
    let clusters = hub.clusters().expect("the hub serves");
    seen.push(condition_of(&clusters, &id, READY));
    assert!(
        seen.iter().all(|s| *s != Status::True),
        "Ready was True at some point: {seen:?}"
    );
    assert_eq!(condition_of(&clusters, &id, HEALTHY), Status::False);
    Ok(())
}

#[test]
fn a_manifest_that_fails_to_load_at_restart_keeps_the_hub_unready_instead_of_dropping_its_clusters()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pki = Pki::generate(dir.path())?;
    let (manifests, data) = (dir.path().join("manifests"), dir.path().join("data"));
    std::fs::create_dir_all(&manifests)?;
    let (key_a, key_b) = (keygen(dir.path(), "edge-a")?, keygen(dir.path(), "edge-b")?);
    let good = format!(
        "{}---\n{}",
        member_cluster("edge-a", &key_a, ""),
        member_cluster("edge-b", &key_b, "")
    );
    let file = manifests.join("edges.yaml");
    std::fs::write(&file, &good)?;
    let mut hub = EmbeddedHub::spawn(&manifests, &data, &pki, &[])?;
    let _agent = agent(dir.path(), &hub, "edge-a")?;
    let id = ClusterId::new("fleet", "edge-a");
    blocking_until("edge-a Healthy", DEADLINE, || {
        hub.clusters()
            .is_some_and(|mcs| condition_of(&mcs, &id, HEALTHY) == Status::True)
    })?;
    assert!(hub.process.terminate(Duration::from_secs(10))?);

    // While the hub is down, only the second document gets an invalid value.
    let broken = format!(
        "{}---\n{}",
        member_cluster("edge-a", &key_a, ""),
        member_cluster("edge-b", &key_b, "")
            .replace("gracePeriodSeconds: 4", "gracePeriodSeconds: -4")
    );
    std::fs::write(&file, &broken)?;
    let hub = EmbeddedHub::spawn(&manifests, &data, &pki, &[])?;
    blocking_until("the hub to say why it does not serve", DEADLINE, || {
        hub.process
            .log_line("manifests failed to load at start")
            .is_some()
    })?;
    let line = hub
        .process
        .log_line("manifests failed to load at start")
        .unwrap();
    assert!(
        line.contains("edges.yaml") && line.contains("document"),
        "{line}"
    );
    assert!(
        hub.clusters().is_none(),
        "no read API from a partial registry"
    );

    std::fs::write(&file, &good)?;
    blocking_until("edge-a Healthy again after the fix", DEADLINE, || {
        hub.clusters()
            .is_some_and(|mcs| condition_of(&mcs, &id, HEALTHY) == Status::True)
    })?;
    let clusters = hub.clusters().unwrap();
    assert_eq!(clusters.len(), 2, "both clusters of the file are back");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_with_a_skewed_clock_pulls_its_checks_exactly_when_its_heartbeats_are_accepted()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pki = Pki::generate(dir.path())?;
    let manifests = dir.path().join("manifests");
    // Seconds each cluster's agent clock is off the hub's, and whether the hub (120 s of
    // tolerated skew, reports and config requests living 300 s) accepts what it signs:
    // up to 420 s behind and 120 s ahead.
    let offsets = [(-400, true), (110, true), (-450, false), (130, false)];
    let clusters = write_clusters(&manifests, offsets.len(), 1, 4)?;
    let data = dir.path().join("data");
    let hub = tokio::task::block_in_place(|| {
        let hub = EmbeddedHub::spawn(&manifests, &data, &pki, &[])?;
        hub.wait_serving(offsets.len(), DEADLINE)?;
        anyhow::Ok(hub)
    })?;
    let ca = std::fs::read(&pki.ca_cert)?;
    for ((offset, accepted), cluster) in offsets.into_iter().zip(&clusters) {
        let http = client(&ca, Transport::Http2)?;
        let mut agent = HandAgent::skewed(http, &hub.server, cluster, offset);
        let (beat, beat_code, _) = agent.heartbeat(false).await;
        let (config, config_code, _) = agent.config(&cluster.key).await;
        assert_eq!(
            (beat == 200, config == 200),
            (accepted, accepted),
            "clock {offset:+} s off: heartbeat {beat}, config pull {config} {config_code}"
        );
        if !accepted {
            // Refused for its clock, not for anything else.
            assert_eq!(
                (beat_code.as_str(), config_code.as_str()),
                ("report_expired", "report_expired"),
                "clock {offset:+} s off"
            );
        }
    }
    Ok(())
}

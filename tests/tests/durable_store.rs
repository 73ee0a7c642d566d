//! The embedded store through the real `fleetpulse-hub serve`: after a clean shutdown the
//! state is in `fleetpulse.db` alone (the WAL was checkpointed); after a crash, which loses
//! the positions accepted since the last flush, no report from before it is accepted again;
//! and a database file that is not SQLite stops the hub with an error naming the file and
//! the fix.

use std::time::Duration;

use fleetpulse_agent::AgentOptions;
use fleetpulse_common::api::condition::{REACHABLE, Status};
use fleetpulse_common::protocol::keys;
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::store::Store;
use fleetpulse_hub::store::sqlite::SqliteStore;
use fleetpulse_tests::admin_api::{self, sample};
use fleetpulse_tests::embedded_hub::EmbeddedHub;
use fleetpulse_tests::fleet::{condition_of, write_clusters};
use fleetpulse_tests::hand_agent::HandAgent;
use fleetpulse_tests::loadgen::client::{Transport, client};
use fleetpulse_tests::pki::Pki;
use fleetpulse_tests::process::Running;
use fleetpulse_tests::wait::{self, blocking_until};

const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_clean_shutdown_the_database_file_alone_holds_the_state() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pki = Pki::generate(dir.path())?;
    let (manifests, data) = (dir.path().join("manifests"), dir.path().join("data"));
    let clusters = write_clusters(&manifests, 1, 1, 4)?;
    let mut hub = EmbeddedHub::spawn(&manifests, &data, &pki, &[])?;
    let mut options = AgentOptions::new(
        hub.server.parse()?,
        clusters[0].id.clone(),
        clusters[0].key.clone(),
    );
    options.hub_ca_pem = Some(std::fs::read(&pki.ca_cert)?);
    options.interval = Duration::from_secs(1);
    let agent = fleetpulse_agent::spawn(options)?;
    let id = clusters[0].id.clone();
    tokio::task::block_in_place(|| {
        blocking_until("edge-1 Reachable", DEADLINE, || {
            hub.clusters()
                .is_some_and(|c| condition_of(&c, &id, REACHABLE) == Status::True)
        })
    })?;
    drop(agent);
    let stopped = tokio::task::block_in_place(|| hub.process.terminate(DEADLINE))?;
    assert!(stopped, "the hub stops cleanly");
    assert!(hub.process.log_line("state persisted").is_some());

    let wal = data.join("fleetpulse.db-wal");
    let wal_bytes = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert_eq!(wal_bytes, 0, "the WAL was checkpointed into the database");
    // The database file alone, as a backup of it or a lost WAL would leave it.
    let copy = tempfile::tempdir()?;
    std::fs::copy(
        data.join("fleetpulse.db"),
        copy.path().join("fleetpulse.db"),
    )?;
    let snapshot = SqliteStore::open(copy.path())?.load()?;
    let record = snapshot
        .clusters
        .get(&id)
        .expect("edge-1's record is in the database");
    let reachable = record
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == REACHABLE);
    assert_eq!(reachable.map(|c| c.status.as_str()), Some("True"));
    assert!(
        snapshot.positions.contains_key(&id),
        "its accepted position too"
    );
    Ok(())
}

/// The hub's heartbeats answered with `result`, from its `/metrics`.
async fn heartbeats(hub: &EmbeddedHub, result: &str) -> anyhow::Result<f64> {
    let ca = std::path::Path::new(&hub.ca);
    let (_, metrics) = admin_api::get(ca, &format!("{}/metrics", hub.admin), None).await?;
    Ok(sample(
        &metrics,
        &format!("fleetpulse_hub_heartbeats_total{{result=\"{result}\"}}"),
    ))
}

/// `hub` once it has restored its state and serves agents.
fn loaded(hub: EmbeddedHub) -> anyhow::Result<EmbeddedHub> {
    tokio::task::block_in_place(|| hub.wait_serving(2, DEADLINE))?;
    Ok(hub)
}

/// Heartbeats the real agent log says it restarted its sequence for.
fn sequence_restarts(agent: &Running) -> usize {
    agent.log_count("restarting the sequence above it")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_crash_no_report_from_before_it_is_accepted_and_running_agents_restart_above_it()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pki = Pki::generate(dir.path())?;
    let (manifests, data) = (dir.path().join("manifests"), dir.path().join("data"));
    let clusters = write_clusters(&manifests, 2, 1, 4)?;
    // Positions reach the store only at shutdown: a crash loses every one.
    let flags = ["--seq-flush-seconds", "3600"];
    let mut hub = EmbeddedHub::spawn(&manifests, &data, &pki, &flags)?;
    let listen = hub.server.replace("https://localhost", "127.0.0.1");
    let restart_flags = [flags.as_slice(), &["--listen", &listen]].concat();

    // edge-1: the real agent, running across both restarts.
    let key_file = dir.path().join("edge-1.pem");
    std::fs::write(&key_file, keys::to_pem(&clusters[0].key))?;
    let agent = hub.agent("agent", "fleet/edge-1", &key_file)?;
    let (edge1, edge2) = (clusters[0].id.clone(), clusters[1].id.clone());
    let reachable = |hub: &EmbeddedHub, id: &ClusterId| {
        hub.clusters()
            .is_some_and(|c| condition_of(&c, id, REACHABLE) == Status::True)
    };
    tokio::task::block_in_place(|| {
        blocking_until("edge-1 Reachable", DEADLINE, || reachable(&hub, &edge1))
    })?;
    // edge-2: a report accepted now, captured by whoever watched the wire.
    let http = client(&std::fs::read(&pki.ca_cert)?, Transport::Http2)?;
    let mut hand = HandAgent::new(http, &hub.server, &clusters[1]);
    let captured = hand.next_jws(false);
    assert_eq!(hand.resend(&captured).await.0, 200);
    assert_eq!(sequence_restarts(&agent), 0);

    // The hub is killed: no shutdown flush, no clean-stop mark.
    hub.process.signal("KILL")?;
    tokio::task::block_in_place(|| {
        blocking_until("the hub to die", DEADLINE, || {
            hub.process.exited().is_some()
        })
    })?;
    let hub = loaded(EmbeddedHub::spawn(&manifests, &data, &pki, &restart_flags)?)?;
    assert!(
        hub.process
            .log_line("agent incarnations from before this start are refused")
            .is_some_and(|l| l.contains("no mark of a clean stop")),
        "the hub says why it refuses earlier incarnations"
    );
    // The captured report is refused, although its position was lost with the crash...
    let (status, code, _) = hand.resend(&captured).await;
    assert_eq!((status, code.as_str()), (409, "stale_sequence"));
    // ...and so is any other report of that incarnation; an agent booted after the hub's
    // start is served.
    assert_eq!(hand.heartbeat(false).await.1, "stale_sequence");
    let http = client(&std::fs::read(&pki.ca_cert)?, Transport::Http2)?;
    let mut rebooted = HandAgent::new(http, &hub.server, &clusters[1]);
    assert_eq!(rebooted.heartbeat(false).await.0, 200);
    // The real agent restarted its sequence above the hub's start once and reports on.
    tokio::task::block_in_place(|| {
        blocking_until("edge-1's agent restarts its sequence", DEADLINE, || {
            sequence_restarts(&agent) == 1
        })
    })?;
    tokio::task::block_in_place(|| {
        blocking_until("edge-1 and edge-2 Reachable", DEADLINE, || {
            reachable(&hub, &edge1) && reachable(&hub, &edge2)
        })
    })?;
    wait::until_some("edge-1 reporting after its restart", DEADLINE, || async {
        (heartbeats(&hub, "accepted").await.ok()? >= 3.0).then_some(())
    })
    .await?;

    // A clean stop keeps every position: the next start refuses no incarnation, and the
    // running agent goes on with its sequence.
    let mut hub = hub;
    let stopped = tokio::task::block_in_place(|| hub.process.terminate(DEADLINE))?;
    assert!(stopped, "the hub stops cleanly");
    let hub = loaded(EmbeddedHub::spawn(&manifests, &data, &pki, &restart_flags)?)?;
    assert!(
        hub.process
            .log_line("agent incarnations from before this start are refused")
            .is_none()
    );
    wait::until_some(
        "edge-1 reporting after the clean restart",
        DEADLINE,
        || async { (heartbeats(&hub, "accepted").await.ok()? >= 3.0).then_some(()) },
    )
    .await?;
    assert_eq!(heartbeats(&hub, "stale_sequence").await?, 0.0);
    assert_eq!(
        sequence_restarts(&agent),
        1,
        "no restart after a clean stop"
    );
    Ok(())
}

#[test]
fn a_database_that_is_not_sqlite_stops_the_hub_naming_the_file_and_the_fix() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (manifests, data) = (dir.path().join("manifests"), dir.path().join("data"));
    write_clusters(&manifests, 1, 1, 4)?;
    std::fs::create_dir_all(&data)?;
    let db = data.join("fleetpulse.db");
    std::fs::write(&db, "not a database\n".repeat(400))?;
    let (m, d) = (manifests.display().to_string(), data.display().to_string());
    let args = [
        "serve",
        "--manifests",
        &m,
        "--data",
        &d,
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--insecure-http",
    ];
    let mut hub = Running::spawn_logged("fleetpulse-hub", "hub", &args)?;
    let mut status = None;
    blocking_until("the hub to exit", DEADLINE, || {
        status = hub.exited();
        status.is_some()
    })?;
    assert!(!status.unwrap().success(), "the hub refuses to start");
    let mut line = None;
    blocking_until("the hub's error in its log", DEADLINE, || {
        line = hub.log_line("not an SQLite database");
        line.is_some()
    })?;
    let line = line.expect("the hub says the file is not SQLite");
    assert!(line.contains(&db.display().to_string()), "{line}");
    assert!(line.contains("restore the file from a backup"), "{line}");
    assert_eq!(
        std::fs::read_to_string(&db)?,
        "not a database\n".repeat(400),
        "left as it was"
    );
    Ok(())
}

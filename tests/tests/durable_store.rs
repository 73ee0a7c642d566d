//! The embedded store through the real `fleetpulse-hub serve`: after a clean shutdown the
//! state is in `fleetpulse.db` alone (the WAL was checkpointed), and a database file that
//! is not SQLite stops the hub with an error naming the file and the fix.

use std::time::Duration;

use fleetpulse_agent::AgentOptions;
use fleetpulse_common::api::condition::{REACHABLE, Status};
use fleetpulse_hub::store::Store;
use fleetpulse_hub::store::sqlite::SqliteStore;
use fleetpulse_tests::embedded_hub::EmbeddedHub;
use fleetpulse_tests::fleet::{condition_of, write_clusters};
use fleetpulse_tests::pki::Pki;
use fleetpulse_tests::process::Running;
use fleetpulse_tests::wait::blocking_until;

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

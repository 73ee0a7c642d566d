//! The embedded store: records survive a reopen, the WAL is checkpointed, a file that is
//! not SQLite or is corrupt is refused, an unreadable record is skipped, and the next open
//! knows whether the last stop was clean.

use std::collections::HashMap;

use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::ClusterId;

use super::*;
use crate::store::StoredCluster;

#[test]
fn records_and_positions_survive_reopen_and_positions_never_go_back() {
    let dir = tempfile::tempdir().unwrap();
    let id = ClusterId::new("fleet", "a");
    let mut store = SqliteStore::open(dir.path()).unwrap();
    let record = StoredCluster {
        config_hash: 7,
        ..Default::default()
    };
    let pos = |incarnation, seq| Position { incarnation, seq };
    store
        .apply(&[
            Write::Cluster {
                cluster: id.clone(),
                record: record.clone(),
            },
            Write::Positions {
                cluster: id.clone(),
                positions: [("k".into(), pos(2, 5))].into(),
                heard: None,
            },
        ])
        .unwrap();
    store
        .apply(&[Write::Positions {
            cluster: id.clone(),
            positions: [("k".into(), pos(1, 99))].into(),
            heard: None,
        }])
        .unwrap();
    drop(store);
    let snapshot = SqliteStore::open(dir.path()).unwrap().load().unwrap();
    assert_eq!(snapshot.clusters[&id], record);
    assert_eq!(snapshot.positions[&id]["k"], pos(2, 5));
}

fn one_cluster(store: &mut SqliteStore, name: &str, config_hash: u64) {
    let record = StoredCluster {
        config_hash,
        ..Default::default()
    };
    store
        .apply(&[Write::Cluster {
            cluster: ClusterId::new("fleet", name),
            record,
        }])
        .unwrap();
}

#[test]
fn after_a_clean_stop_the_database_file_alone_holds_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(dir.path()).unwrap();
    one_cluster(&mut store, "a", 7);
    store.clean_stop().unwrap();
    let wal = dir.path().join("fleetpulse.db-wal");
    assert_eq!(
        std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0),
        0,
        "WAL truncated"
    );
    // Only the database file, as a backup or a lost WAL would leave it; the store is
    // still open, so SQLite has not checkpointed on close.
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(
        dir.path().join("fleetpulse.db"),
        copy.path().join("fleetpulse.db"),
    )
    .unwrap();
    let snapshot = SqliteStore::open(copy.path()).unwrap().load().unwrap();
    assert_eq!(
        snapshot.clusters[&ClusterId::new("fleet", "a")].config_hash,
        7
    );
    drop(store);
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_naming_the_file_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleetpulse.db");
    std::fs::write(&path, "clusters:\n  a: healthy\n".repeat(100)).unwrap();
    let message = match SqliteStore::open(dir.path()) {
        Err(e @ StoreError::Corrupt { .. }) => e.to_string(),
        Err(other) => panic!("not reported as corrupt: {other}"),
        Ok(_) => panic!("a text file opened as the store"),
    };
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("not an SQLite database"), "{message}");
    assert!(
        message.contains("restore the file from a backup"),
        "{message}"
    );
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .starts_with("clusters:"),
        "the file is left as it was"
    );
}

#[test]
fn a_corrupt_database_is_refused_rather_than_opened_empty() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(dir.path()).unwrap();
    for i in 0..200 {
        one_cluster(&mut store, &format!("cluster-{i}"), i);
    }
    store.clean_stop().unwrap();
    drop(store);
    let path = dir.path().join("fleetpulse.db");
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 3 * 4096, "several pages to damage");
    // Every page after the first two overwritten: the schema survives, the tables not.
    for b in &mut bytes[2 * 4096..] {
        *b = 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    match SqliteStore::open(dir.path()) {
        Err(StoreError::Corrupt { path: p, problem }) => {
            assert_eq!(p, path.display().to_string());
            assert!(!problem.is_empty());
        }
        Err(other) => panic!("not reported as corrupt: {other}"),
        Ok(_) => panic!("a corrupt database opened"),
    }
}

#[test]
fn one_unreadable_record_is_skipped_and_the_others_load() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(dir.path()).unwrap();
    one_cluster(&mut store, "good", 1);
    store
        .apply(&[Write::Positions {
            cluster: ClusterId::new("fleet", "good"),
            positions: HashMap::from([(
                "k".into(),
                Position {
                    incarnation: 1,
                    seq: 3,
                },
            )]),
            heard: None,
        }])
        .unwrap();
    store
        .conn
        .execute_batch(
            "INSERT INTO clusters VALUES ('fleet', 'bad', '{not json');
             INSERT INTO positions VALUES ('fleet', 'bad', 'k', 'one', 2);
             INSERT INTO sets VALUES ('ClusterSet', '', 'primary', 'nope');",
        )
        .unwrap();
    let snapshot = store.load().unwrap();
    let (good, bad) = (
        ClusterId::new("fleet", "good"),
        ClusterId::new("fleet", "bad"),
    );
    assert!(snapshot.clusters.contains_key(&good));
    assert!(!snapshot.clusters.contains_key(&bad));
    assert_eq!(
        snapshot.positions[&good]["k"],
        Position {
            incarnation: 1,
            seq: 3
        }
    );
    assert!(!snapshot.positions.contains_key(&bad));
    assert!(snapshot.sets.is_empty());
}

#[test]
fn the_next_open_knows_whether_the_last_stop_was_clean() {
    let dir = tempfile::tempdir().unwrap();
    let kept = |dir: &std::path::Path| SqliteStore::open(dir).unwrap().load().unwrap();
    // A new store lost nothing.
    assert_eq!(kept(dir.path()).positions_kept, PositionsKept::All);
    // That open was not followed by a clean stop (the store was dropped, as a crash would).
    assert_eq!(
        kept(dir.path()).positions_kept,
        PositionsKept::UntilLastFlush
    );

    let mut store = SqliteStore::open(dir.path()).unwrap();
    one_cluster(&mut store, "a", 1);
    store.clean_stop().unwrap();
    drop(store);
    let mut store = SqliteStore::open(dir.path()).unwrap();
    assert_eq!(store.load().unwrap().positions_kept, PositionsKept::All);
    // This run crashes with its WAL lost: the database file alone must not say clean.
    one_cluster(&mut store, "b", 2);
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(
        dir.path().join("fleetpulse.db"),
        copy.path().join("fleetpulse.db"),
    )
    .unwrap();
    drop(store);
    assert_eq!(
        kept(copy.path()).positions_kept,
        PositionsKept::UntilLastFlush
    );
    assert_eq!(
        kept(dir.path()).positions_kept,
        PositionsKept::UntilLastFlush
    );
}

//! The writer against a store that fails while it is "down".

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::*;
use crate::store::{Snapshot, StoreError, StoredCluster};

#[derive(Clone, Default)]
struct Flaky {
    down: Arc<AtomicBool>,
    attempts: Arc<AtomicUsize>,
    applied: Arc<Mutex<Vec<Vec<Write>>>>,
    clean_stops: Arc<AtomicUsize>,
}

impl Store for Flaky {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        Ok(Snapshot::default())
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::Decode {
                cluster: "test".into(),
                source: serde_json::from_str::<()>("down").unwrap_err(),
            });
        }
        self.applied.lock().push(writes.to_vec());
        Ok(())
    }

    fn clean_stop(&mut self) -> Result<(), StoreError> {
        self.clean_stops.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

fn cluster(name: &str, generation: u64) -> Write {
    let mut record = StoredCluster::default();
    record.status.config_generation = Some(generation);
    Write::Cluster {
        cluster: ClusterId::new("fleet", name),
        record,
    }
}

fn generations(writes: &[Write]) -> Vec<(String, u64)> {
    writes
        .iter()
        .map(|w| match w {
            Write::Cluster { cluster, record } => (
                cluster.name.clone(),
                record.status.config_generation.unwrap_or_default(),
            ),
            other => panic!("unexpected write {other:?}"),
        })
        .collect()
}

fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

const FAST: RetrySettings = RetrySettings {
    first: Duration::from_millis(10),
    max: Duration::from_millis(40),
};

#[test]
fn a_failed_write_is_retried_without_another_write_arriving() {
    let store = Flaky::default();
    store.down.store(true, Ordering::SeqCst);
    let writer = StoreWriter::spawn_with(store.clone(), FAST);
    writer.send(vec![cluster("a", 1)]);
    wait_for("two failed attempts", || {
        store.attempts.load(Ordering::SeqCst) >= 2
    });
    assert!(store.applied.lock().is_empty());

    store.down.store(false, Ordering::SeqCst);
    wait_for("the write applied", || !store.applied.lock().is_empty());
    assert_eq!(generations(&store.applied.lock()[0]), [("a".into(), 1)]);
}

#[test]
fn writes_queued_during_an_outage_keep_only_the_last_per_object_in_order() {
    let store = Flaky::default();
    store.down.store(true, Ordering::SeqCst);
    let writer = StoreWriter::spawn_with(store.clone(), FAST);
    writer.send(vec![cluster("a", 1), cluster("b", 1)]);
    wait_for("a failed attempt", || {
        store.attempts.load(Ordering::SeqCst) >= 1
    });
    writer.send(vec![cluster("a", 2), cluster("c", 1)]);
    writer.send(vec![cluster("b", 2)]);
    writer.sync();
    store.down.store(false, Ordering::SeqCst);
    wait_for("the writes applied", || !store.applied.lock().is_empty());
    let applied = store.applied.lock()[0].clone();
    assert_eq!(
        generations(&applied),
        [("a".into(), 2), ("c".into(), 1), ("b".into(), 2)]
    );
}

#[test]
fn without_failures_every_write_is_applied_as_sent() {
    let store = Flaky::default();
    let writer = StoreWriter::spawn_with(store.clone(), FAST);
    writer.send(vec![cluster("a", 1), cluster("a", 2)]);
    writer.sync();
    let applied: Vec<Write> = store.applied.lock().concat();
    assert_eq!(generations(&applied), [("a".into(), 1), ("a".into(), 2)]);
}

#[test]
fn while_writes_fail_the_writer_says_why_and_close_reports_them_not_persisted() {
    let store = Flaky::default();
    store.down.store(true, Ordering::SeqCst);
    let writer = StoreWriter::spawn_with(store.clone(), FAST);
    assert_eq!(writer.problem(), None, "nothing failed yet");
    writer.send(vec![cluster("a", 1)]);
    wait_for("the failure reported", || writer.problem().is_some());
    let problem = writer.problem().unwrap();
    assert!(problem.contains("1 write(s) not stored"), "{problem}");
    let closed = writer.close();
    assert!(
        closed.as_ref().is_err_and(|e| e.contains("not stored")),
        "close says what was not persisted: {closed:?}"
    );
    assert_eq!(store.clean_stops.load(Ordering::SeqCst), 0);

    store.down.store(false, Ordering::SeqCst);
    wait_for("the store caught up", || writer.problem().is_none());
    assert_eq!(writer.close(), Ok(()));
    assert_eq!(store.clean_stops.load(Ordering::SeqCst), 1);
    assert_eq!(
        generations(&store.applied.lock().concat()),
        [("a".into(), 1)]
    );
}

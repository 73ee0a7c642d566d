//! The `Mirrored` condition the feed records survives a transition whose status write is
//! under way at the same moment: the store ends with the later record, whichever write
//! finished its own work first. The interleaving is forced, not hoped for: a hook on the
//! transition's log line (where a hub thread can be preempted, or blocked on a full log
//! pipe) sets `Mirrored` from another thread before the transition's thread goes on.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fleetpulse_common::api::condition::{MIRRORED, REACHABLE};
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use super::*;
use crate::fleet::{Objects, Settings, shared};
use crate::mirrors::MirroredCondition;
use crate::store::{StoreWriter, Write};
use crate::testing::{self, MemoryStore};

/// How long the hook lets the concurrent write run before the hooked thread goes on
/// (reached only if that write waits on a lock the hooked thread holds).
const DEADLINE: Duration = Duration::from_secs(10);

/// Held by each test here throughout: while a single hook exists, tracing caches a log
/// line first reached on another thread as of no interest to any (it asks only that
/// thread's subscriber), so one test's unhooked transition would mute the other's hook.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `then` the first time the thread it is installed on logs `message`.
struct OnLog {
    message: &'static str,
    then: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

/// The `message` field of an event.
#[derive(Default)]
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for OnLog {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut message = Message::default();
        event.record(&mut message);
        if message.0 == self.message {
            let then = self.then.lock().take();
            if let Some(then) = then {
                then();
            }
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// A fleet of one cluster over a store the test reads.
fn fleet() -> (Arc<Fleet>, MemoryStore, ClusterId) {
    let store = MemoryStore::new();
    let fleet = Fleet::new(Settings::default(), StoreWriter::spawn(store.clone()));
    let objects = Objects {
        member_clusters: shared(vec![testing::cluster("fleet/edge-1").build()]),
        ..Default::default()
    };
    assert!(
        fleet
            .reload(objects, Instant::now(), Timestamp::now())
            .is_empty()
    );
    (Arc::new(fleet), store, ClusterId::new("fleet", "edge-1"))
}

fn accept(fleet: &Fleet, id: &ClusterId, seq: u64, now: Instant) {
    let entry = fleet.registry().cluster(id).cloned().unwrap();
    let report = testing::report(id).seq(seq).build();
    let admitted = testing::admitted(entry, report);
    fleet.accept(&admitted, now, Timestamp::now()).unwrap();
}

fn mirrored() -> MirroredCondition {
    MirroredCondition {
        status: "True",
        reason: "Mirrored".into(),
        message: "up to date: SveltosCluster lib.projectsveltos.io/v1beta1 fleet/edge-1".into(),
    }
}

/// Runs `transition` on this thread; when it logs `message`, sets the cluster's
/// `Mirrored` on another thread (as the mirror feed does) and waits for that to finish.
fn mirrored_during(
    fleet: &Arc<Fleet>,
    id: &ClusterId,
    message: &'static str,
    transition: impl FnOnce(),
) {
    let (writer, cluster) = (fleet.clone(), id.clone());
    let spawned = Arc::new(Mutex::new(None));
    let handle = spawned.clone();
    let hook = OnLog {
        message,
        then: Mutex::new(Some(Box::new(move || {
            let (done_tx, done) = mpsc::channel();
            *handle.lock() = Some(std::thread::spawn(move || {
                super::set_mirrored(&writer, &cluster, Some(&mirrored()), Timestamp::now());
                let _ = done_tx.send(());
            }));
            // At once, unless this thread holds a lock the write needs: then the write
            // follows the transition once it is released, which is as good.
            let _ = done.recv_timeout(DEADLINE);
        }))),
    };
    // Each log line's cached interest recomputed with the hook in place: a line first
    // logged while no hook existed, or on another thread, is cached as of no interest.
    tracing::subscriber::with_default(hook, || {
        tracing::callsite::rebuild_interest_cache();
        transition();
    });
    let write = spawned.lock().take();
    write
        .expect("the transition logged its line")
        .join()
        .unwrap();
}

/// The conditions `(type, status)` of the last status of `id` the store holds.
fn stored(fleet: &Fleet, store: &MemoryStore, id: &ClusterId) -> Vec<(String, String)> {
    fleet.sync();
    let last = (store.writes().into_iter().rev()).find_map(|w| match w {
        Write::Cluster { cluster, record } if cluster == *id => Some(record),
        _ => None,
    });
    let record = last.expect("the cluster's status was written");
    (record.status.conditions.iter())
        .map(|c| (c.type_.clone(), c.status.clone()))
        .collect()
}

fn has(conditions: &[(String, String)], type_: &str, status: &str) -> bool {
    conditions.iter().any(|(t, s)| t == type_ && s == status)
}

#[test]
fn mirrored_set_while_a_reports_transition_is_being_written_is_not_overwritten_by_it() {
    let _serial = ONE_AT_A_TIME.lock();
    let (fleet, store, id) = fleet();
    let now = Instant::now();
    mirrored_during(&fleet, &id, "cluster conditions changed on report", || {
        accept(&fleet, &id, 1, now);
    });
    let conditions = stored(&fleet, &store, &id);
    assert!(has(&conditions, REACHABLE, "True"), "{conditions:?}");
    assert!(
        has(&conditions, MIRRORED, "True"),
        "the transition's older record overwrote Mirrored: {conditions:?}"
    );
}

#[test]
fn mirrored_set_while_the_detectors_unreachable_is_being_written_is_not_overwritten_by_it() {
    let _serial = ONE_AT_A_TIME.lock();
    let (fleet, store, id) = fleet();
    let now = Instant::now();
    accept(&fleet, &id, 1, now);
    let silent = now + Duration::from_secs(3600);
    mirrored_during(&fleet, &id, "cluster became unreachable", || {
        fleet.tick(silent, Timestamp::now());
    });
    let conditions = stored(&fleet, &store, &id);
    assert!(has(&conditions, REACHABLE, "False"), "{conditions:?}");
    assert!(
        has(&conditions, MIRRORED, "True"),
        "the transition's older record overwrote Mirrored: {conditions:?}"
    );
}

#[test]
fn the_feed_syncs_at_most_a_tenth_of_the_time_and_waits_at_most_a_second() {
    // A sync of a small fleet costs microseconds: the next may follow almost at once.
    assert_eq!(
        Pace::wait_after(Duration::from_micros(20)),
        Duration::from_micros(180)
    );
    // One of 100,000 clusters costs milliseconds: nine times that idle before the next.
    let took = Duration::from_millis(5);
    let wait = Pace::wait_after(took);
    assert_eq!(wait, Duration::from_millis(45));
    assert!(took.as_secs_f64() / (took + wait).as_secs_f64() <= 0.1 + 1e-9);
    // However slow a sync, mirrors hear of a decision within about a second more.
    assert_eq!(
        Pace::wait_after(Duration::from_secs(3)),
        Duration::from_secs(1)
    );
}

//! The task that owns every mirror object's state: it takes what the hub observed, decides
//! which objects are due (wanted state changed, resync interval passed, backoff over),
//! writes them a few at a time, and folds outcomes into statuses and `Mirrored` changes.
//! While frozen (the partition brake) it starts nothing and aborts what is in flight.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use fleetpulse_common::protocol::report::ClusterId;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::plan::{TaintPlan, Wanted};
use super::status::{MirrorChange, MirrorState, MirrorStatus, MirroredCondition, condition};
use super::writer::{MirrorError, Target, Writer};
use super::{Command, Entry};

/// Writes at most this many objects at once.
const CONCURRENCY: usize = 8;

struct Object {
    entry: Entry,
    /// What was last written or found in place (`None`: unknown, read before writing).
    synced: Option<Wanted>,
    due: Option<Instant>,
    backoff: Option<ExponentialBackoff>,
    in_flight: bool,
    writes: u64,
    outcome: Option<(MirrorState, String, String)>,
}

pub(super) struct Worker {
    pub writer: Option<Arc<Writer>>,
    pub resync: Duration,
    pub statuses: Arc<Mutex<HashMap<ClusterId, Vec<MirrorStatus>>>>,
    pub changes: mpsc::UnboundedSender<MirrorChange>,
    pub stop: CancellationToken,
}

/// A cluster's mirror: its object, or (for an unknown kind or an unresolved default) its
/// position in the cluster's list.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Object(Target),
    Unresolved(usize),
}

impl Slot {
    fn of(entry: &Entry, position: usize) -> Self {
        match &entry.target {
            Some(t) => Self::Object(t.clone()),
            None => Self::Unresolved(position),
        }
    }
}

type Key = (ClusterId, Slot);
type Done = (Key, Wanted, Result<u32, MirrorError>);

impl Worker {
    pub async fn run(self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut objects: BTreeMap<Key, Object> = BTreeMap::new();
        let mut conditions: HashMap<ClusterId, MirroredCondition> = HashMap::new();
        let mut running: JoinSet<Done> = JoinSet::new();
        let mut frozen = false;
        loop {
            let next = objects
                .values()
                .filter(|o| !o.in_flight)
                .filter_map(|o| o.due)
                .min();
            let sleep =
                tokio::time::sleep_until(next.unwrap_or_else(|| Instant::now() + self.resync));
            tokio::select! {
                () = self.stop.cancelled() => break,
                cmd = commands.recv() => match cmd {
                    None => break,
                    Some(Command::Freeze(on)) => {
                        frozen = on;
                        if on {
                            running.abort_all();
                        }
                    }
                    Some(Command::Observe { cluster, entries }) => {
                        self.observe(&mut objects, cluster, entries);
                    }
                    Some(Command::Forget(cluster)) => {
                        objects.retain(|(c, _), _| *c != cluster);
                        conditions.remove(&cluster);
                    }
                },
                Some(done) = running.join_next(), if !running.is_empty() => match done {
                    Ok((key, wanted, result)) => self.finish(&mut objects, key, wanted, result),
                    Err(_aborted) => {
                        for o in objects.values_mut().filter(|o| o.in_flight) {
                            o.in_flight = false;
                            o.due = Some(Instant::now());
                        }
                    }
                },
                () = sleep => {}
            }
            if !frozen {
                self.start_due(&mut objects, &mut running);
            }
            self.publish(&objects, &mut conditions, frozen);
        }
        running.abort_all();
    }

    fn observe(
        &self,
        objects: &mut BTreeMap<Key, Object>,
        cluster: ClusterId,
        entries: Vec<Entry>,
    ) {
        let keys: Vec<Key> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (cluster.clone(), Slot::of(e, i)))
            .collect();
        objects.retain(|key, _| key.0 != cluster || keys.contains(key));
        for (key, entry) in keys.into_iter().zip(entries) {
            let object = objects.entry(key).or_insert_with(|| Object {
                entry: entry.clone(),
                synced: None,
                due: None,
                backoff: None,
                in_flight: false,
                writes: 0,
                outcome: None,
            });
            let changed = object.entry.wanted != entry.wanted || object.outcome.is_none();
            object.entry = entry;
            match (&object.entry.target, &object.entry.problem) {
                (_, Some((reason, message))) => {
                    object.outcome = Some((MirrorState::Failed, reason.clone(), message.clone()));
                    object.due = None;
                }
                (Some(_), None) if self.writer.is_none() => {
                    let message = "no mirror cluster configured: shown, not written".to_owned();
                    object.outcome =
                        Some((MirrorState::NotConnected, "NotConnected".into(), message));
                }
                (Some(_), None)
                    if changed && object.synced.as_ref() != Some(&object.entry.wanted) =>
                {
                    object.due = Some(Instant::now());
                    object.backoff = None;
                }
                _ => {}
            }
        }
    }

    fn start_due(&self, objects: &mut BTreeMap<Key, Object>, running: &mut JoinSet<Done>) {
        let Some(writer) = &self.writer else { return };
        let now = Instant::now();
        let wall = super::rfc3339_now();
        for (key, object) in objects.iter_mut() {
            if running.len() >= CONCURRENCY {
                break;
            }
            let Slot::Object(target) = &key.1 else {
                continue;
            };
            if object.in_flight
                || object.due.is_none_or(|d| d > now)
                || object.entry.problem.is_some()
            {
                continue;
            }
            let target = target.clone();
            object.in_flight = true;
            object.due = None;
            let (writer, key, wanted, wall) = (
                writer.clone(),
                key.clone(),
                object.entry.wanted.clone(),
                wall.clone(),
            );
            tracing::debug!(object = %object.entry.object, labels = ?wanted.labels, taint = ?wanted.taint, "syncing mirror");
            running.spawn(async move {
                let result = writer.sync(&target, &wanted, &wall).await;
                (key, wanted, result)
            });
        }
    }

    fn finish(
        &self,
        objects: &mut BTreeMap<Key, Object>,
        key: Key,
        wanted: Wanted,
        result: Result<u32, MirrorError>,
    ) {
        let Some(object) = objects.get_mut(&key) else {
            return;
        };
        object.in_flight = false;
        let now = Instant::now();
        match result {
            Ok(writes) => {
                object.writes += u64::from(writes);
                object.synced = Some(wanted.clone());
                object.backoff = None;
                let message = if writes == 0 { "up to date" } else { "written" };
                object.outcome = Some((
                    MirrorState::Written,
                    "Mirrored".into(),
                    format!("{}: {message}", object.entry.object),
                ));
                object.due = Some(if object.entry.wanted == wanted {
                    now + self.resync
                } else {
                    now
                });
            }
            Err(error) => {
                tracing::warn!(cluster = %format!("{}/{}", key.0.namespace, key.0.name), %error, "mirror write failed");
                object.synced = None;
                let backoff = object.backoff.get_or_insert_with(|| {
                    ExponentialBuilder::default()
                        .with_min_delay(Duration::from_secs(1))
                        .with_max_delay(self.resync)
                        .with_jitter()
                        .without_max_times()
                        .build()
                });
                // Jitter may add to a delay: never wait longer than a resync.
                let delay = backoff.next().unwrap_or(self.resync).min(self.resync);
                object.due = Some(now + delay);
                object.outcome = Some((
                    MirrorState::Failed,
                    error.reason().into(),
                    error.to_string(),
                ));
            }
        }
    }

    fn publish(
        &self,
        objects: &BTreeMap<Key, Object>,
        conditions: &mut HashMap<ClusterId, MirroredCondition>,
        frozen: bool,
    ) {
        let mut by_cluster: HashMap<ClusterId, Vec<MirrorStatus>> = HashMap::new();
        for ((cluster, _), o) in objects {
            let waiting = o.due.is_some() && o.synced.as_ref() != Some(&o.entry.wanted);
            let (state, reason, message) = match o.outcome.clone() {
                _ if frozen && waiting => (
                    MirrorState::Pending,
                    "Frozen".into(),
                    "the partition brake holds every mirror write".into(),
                ),
                Some((MirrorState::Written, ..)) | None if waiting => (
                    MirrorState::Pending,
                    "Pending".into(),
                    "queued for writing".into(),
                ),
                Some(outcome) => outcome,
                None => (
                    MirrorState::Pending,
                    "Pending".into(),
                    "not synced yet".into(),
                ),
            };
            by_cluster
                .entry(cluster.clone())
                .or_default()
                .push(MirrorStatus {
                    object: o.entry.object.clone(),
                    state,
                    reason,
                    message,
                    labels: o.entry.wanted.labels.clone(),
                    taint: match o.entry.wanted.taint {
                        TaintPlan::Present(effect) => Some(effect.to_owned()),
                        TaintPlan::Absent | TaintPlan::NotManaged => None,
                    },
                    writes: o.writes,
                });
        }
        for (cluster, statuses) in &by_cluster {
            if let Some(now) = condition(statuses)
                && conditions.get(cluster) != Some(&now)
            {
                conditions.insert(cluster.clone(), now.clone());
                let _ = self.changes.send(MirrorChange {
                    cluster: cluster.clone(),
                    condition: now,
                });
            }
        }
        *self.statuses.lock() = by_cluster;
    }
}

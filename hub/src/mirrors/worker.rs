//! The task that owns every mirror object's state: it takes what the hub observed, decides
//! which objects are due (wanted state changed, resync interval passed, backoff over),
//! writes them a few at a time, and folds outcomes into statuses and `Mirrored` changes.
//! While frozen (the partition brake) it starts nothing and aborts what is in flight.
//! One turn costs what changed (see [`objects`]), so a fleet of 100,000 mirrored
//! clusters is observed in time proportional to it, not to its square.

mod objects;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use fleetpulse_common::protocol::report::ClusterId;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::plan::{TaintPlan, Wanted};
use super::status::{MirrorChange, MirrorState, MirrorStatus, MirroredCondition, condition};
use super::writer::{MirrorError, Writer};
use super::{Command, Entry};
use objects::{Key, Object, Objects, Slot};

/// Writes at most this many objects at once.
const CONCURRENCY: usize = 8;

pub(super) struct Worker {
    pub writer: Option<Arc<Writer>>,
    pub resync: Duration,
    pub statuses: Arc<Mutex<HashMap<ClusterId, Vec<MirrorStatus>>>>,
    pub changes: mpsc::UnboundedSender<MirrorChange>,
    pub stop: CancellationToken,
}

type Done = (Key, Wanted, Result<u32, MirrorError>);

impl Worker {
    pub async fn run(self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut objects = Objects::default();
        let mut conditions: HashMap<ClusterId, MirroredCondition> = HashMap::new();
        let mut running: JoinSet<Done> = JoinSet::new();
        let mut frozen = false;
        loop {
            // With every slot busy, what is due waits for a write to land, not a timer.
            let next = objects
                .next_due()
                .filter(|_| !frozen && running.len() < CONCURRENCY);
            let sleep =
                tokio::time::sleep_until(next.unwrap_or_else(|| Instant::now() + self.resync));
            tokio::select! {
                () = self.stop.cancelled() => break,
                cmd = commands.recv() => match cmd {
                    None => break,
                    Some(Command::Freeze(on)) => {
                        if on {
                            running.abort_all();
                        }
                        if on != frozen {
                            objects.touch_all();
                        }
                        frozen = on;
                    }
                    Some(Command::Observe { cluster, entries }) => {
                        self.observe(&mut objects, &cluster, entries);
                    }
                    Some(Command::Forget(cluster)) => {
                        objects.forget(&cluster);
                        conditions.remove(&cluster);
                    }
                },
                Some(done) = running.join_next(), if !running.is_empty() => match done {
                    Ok((key, wanted, result)) => self.finish(&mut objects, key, wanted, result),
                    Err(_aborted) => objects.aborted(Instant::now()),
                },
                () = sleep => {}
            }
            if !frozen {
                self.start_due(&mut objects, &mut running);
            }
            self.publish(&mut objects, &mut conditions, frozen);
        }
        running.abort_all();
    }

    fn observe(&self, objects: &mut Objects, cluster: &ClusterId, entries: Vec<Entry>) {
        for (key, changed) in objects.replace(cluster, entries) {
            let Some(object) = objects.get_mut(&key) else {
                continue;
            };
            // `Some(due)`: it is due then from now on (`None`: never); `None`: as it was.
            let reschedule = match (&object.entry.target, &object.entry.problem) {
                (_, Some((reason, message))) => {
                    object.outcome = Some((MirrorState::Failed, reason.clone(), message.clone()));
                    Some(None)
                }
                (Some(_), None) if self.writer.is_none() => {
                    let message = "no mirror cluster configured: shown, not written".to_owned();
                    object.outcome =
                        Some((MirrorState::NotConnected, "NotConnected".into(), message));
                    None
                }
                (Some(_), None)
                    if changed && object.synced.as_ref() != Some(&object.entry.wanted) =>
                {
                    object.backoff = None;
                    Some(Some(Instant::now()))
                }
                _ => None,
            };
            if let Some(due) = reschedule {
                objects.schedule(&key, due);
            }
        }
    }

    fn start_due(&self, objects: &mut Objects, running: &mut JoinSet<Done>) {
        let Some(writer) = &self.writer else { return };
        let free = CONCURRENCY.saturating_sub(running.len());
        if free == 0 {
            return;
        }
        let wall = super::rfc3339_now();
        for key in objects.start_due(Instant::now(), free) {
            let Slot::Object(target) = key.1.clone() else {
                objects.landed(&key);
                continue;
            };
            let Some(object) = objects.get_mut(&key) else {
                objects.landed(&key);
                continue;
            };
            let (writer, wanted, wall) =
                (writer.clone(), object.entry.wanted.clone(), wall.clone());
            tracing::debug!(object = %object.entry.object, labels = ?wanted.labels, taint = ?wanted.taint, "syncing mirror");
            running.spawn(async move {
                let result = writer.sync(&target, &wanted, &wall).await;
                (key, wanted, result)
            });
        }
    }

    fn finish(
        &self,
        objects: &mut Objects,
        key: Key,
        wanted: Wanted,
        result: Result<u32, MirrorError>,
    ) {
        objects.landed(&key);
        let Some(object) = objects.get_mut(&key) else {
            return;
        };
        let now = Instant::now();
        let due = match result {
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
                if object.entry.wanted == wanted {
                    now + self.resync
                } else {
                    now
                }
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
                object.outcome = Some((
                    MirrorState::Failed,
                    error.reason().into(),
                    error.to_string(),
                ));
                now + delay
            }
        };
        objects.schedule(&key, Some(due));
    }

    /// Rebuilds the statuses of the clusters touched since the last publish and announces
    /// each change of their `Mirrored` condition.
    fn publish(
        &self,
        objects: &mut Objects,
        conditions: &mut HashMap<ClusterId, MirroredCondition>,
        frozen: bool,
    ) {
        let touched = objects.take_touched();
        if touched.is_empty() {
            return;
        }
        let mut shared = self.statuses.lock();
        for (cluster, objects) in touched {
            let Some(objects) = objects else {
                shared.remove(&cluster);
                continue;
            };
            let statuses: Vec<MirrorStatus> =
                objects.iter().map(|(_, o)| status(o, frozen)).collect();
            if let Some(now) = condition(&statuses)
                && conditions.get(&cluster) != Some(&now)
            {
                conditions.insert(cluster.clone(), now.clone());
                let _ = self.changes.send(MirrorChange {
                    cluster: cluster.clone(),
                    condition: now,
                });
            }
            shared.insert(cluster, statuses);
        }
    }
}

/// What one object's status shows.
fn status(o: &Object, frozen: bool) -> MirrorStatus {
    let waiting = o.waiting();
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
    MirrorStatus {
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
    }
}

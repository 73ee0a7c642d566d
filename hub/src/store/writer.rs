//! [`StoreWriter`]: the thread that applies queued writes to a [`Store`], one transaction per
//! batch, so the heartbeat path never waits on disk or on the API server.
//!
//! A failed batch stays queued and is retried on its own, with exponential backoff (1 s
//! doubling to 30 s by default), not only when the next write arrives: a store that was
//! down while nothing changed still catches up. While it stays down, writes queued for the
//! same object replace the older ones (each carries the object's whole record), so the
//! queue is bounded by the number of objects, not by the outage's length.
//!
//! While writes fail, [`StoreWriter::problem`] says why (the embedded hub's `/readyz`
//! answers 503 with it), and [`StoreWriter::close`] at shutdown says what was not
//! persisted instead of pretending it was.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use parking_lot::Mutex;

use fleetpulse_common::protocol::report::ClusterId;

use super::{Store, Write};
use crate::ids::SetKey;

/// How a failed batch is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetrySettings {
    /// Wait before the first retry; doubles after each failure.
    pub first: Duration,
    /// Longest wait between retries.
    pub max: Duration,
}

impl Default for RetrySettings {
    /// 1 s, doubling up to 30 s.
    fn default() -> Self {
        Self {
            first: Duration::from_secs(1),
            max: Duration::from_secs(30),
        }
    }
}

impl RetrySettings {
    fn backoff(&self) -> impl Iterator<Item = Duration> + use<> {
        ExponentialBuilder::new()
            .with_min_delay(self.first)
            .with_max_delay(self.max)
            .without_max_times()
            .build()
    }
}

enum Command {
    Write(Vec<Write>),
    Sync(mpsc::Sender<()>),
    Close(mpsc::Sender<Result<(), String>>),
}

/// Queues writes to a [`Store`] running on its own thread.
#[derive(Clone, Debug)]
pub struct StoreWriter {
    tx: mpsc::Sender<Command>,
    problem: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Command")
    }
}

impl StoreWriter {
    /// Starts the writer thread, retrying failed writes as [`RetrySettings::default`] says.
    pub fn spawn(store: impl Store) -> Self {
        Self::spawn_with(store, RetrySettings::default())
    }

    /// Starts the writer thread. A failed write is logged with its error and retried after
    /// a backoff (and with the next batch), so nothing is lost while the store recovers.
    pub fn spawn_with(mut store: impl Store, retry: RetrySettings) -> Self {
        let (tx, rx) = mpsc::channel::<Command>();
        let problem = Arc::new(Mutex::new(None));
        let failing = problem.clone();
        thread::Builder::new()
            .name("fleetpulse-store".into())
            .spawn(move || {
                let mut pending: Vec<Write> = Vec::new();
                let mut backoff = None;
                loop {
                    let first = match backoff.as_mut().and_then(Iterator::next) {
                        Some(wait) => match rx.recv_timeout(wait) {
                            Ok(cmd) => Some(cmd),
                            Err(RecvTimeoutError::Timeout) => None,
                            Err(RecvTimeoutError::Disconnected) => break,
                        },
                        None => match rx.recv() {
                            Ok(cmd) => Some(cmd),
                            Err(_) => break,
                        },
                    };
                    let retrying = !pending.is_empty();
                    let (mut waiters, mut closers) = (Vec::new(), Vec::new());
                    for cmd in first.into_iter().chain(rx.try_iter()) {
                        match cmd {
                            Command::Write(w) => pending.extend(w),
                            Command::Sync(done) => waiters.push(done),
                            Command::Close(done) => closers.push(done),
                        }
                    }
                    if retrying {
                        coalesce(&mut pending);
                    }
                    if !pending.is_empty() {
                        match store.apply(&pending) {
                            Ok(()) => {
                                if retrying {
                                    tracing::info!(applied = pending.len(), "store writes caught up");
                                }
                                pending.clear();
                                backoff = None;
                                *failing.lock() = None;
                            }
                            Err(e) => {
                                tracing::error!(error = %e, queued = pending.len(), "store write failed; will retry");
                                backoff.get_or_insert_with(|| retry.backoff());
                                *failing.lock() = Some(format!(
                                    "{} write(s) not stored: {e}",
                                    pending.len()
                                ));
                            }
                        }
                    }
                    for w in waiters {
                        let _ = w.send(());
                    }
                    for c in closers {
                        let closed = match failing.lock().clone() {
                            Some(problem) => Err(problem),
                            None => store.clean_stop().map_err(|e| e.to_string()),
                        };
                        let _ = c.send(closed);
                    }
                }
            })
            .expect("spawning the store thread");
        Self { tx, problem }
    }

    /// Why the last batch could not be written (it is being retried), or `None` while
    /// the store keeps up.
    pub fn problem(&self) -> Option<String> {
        self.problem.lock().clone()
    }

    /// At shutdown: tries everything queued once more, then makes the store durable on its
    /// own ([`Store::clean_stop`]). `Err` says what was not persisted.
    pub fn close(&self) -> Result<(), String> {
        let (done, wait) = mpsc::channel();
        self.tx
            .send(Command::Close(done))
            .map_err(|_| "the store thread stopped".to_owned())?;
        wait.recv()
            .unwrap_or_else(|_| Err("the store thread stopped".into()))
    }

    /// Queues writes (no-op for an empty batch).
    pub fn send(&self, writes: Vec<Write>) {
        if !writes.is_empty() {
            let _ = self.tx.send(Command::Write(writes));
        }
    }

    /// Blocks until everything queued before this call was applied (or tried).
    pub fn sync(&self) {
        let (done, wait) = mpsc::channel();
        if self.tx.send(Command::Sync(done)).is_ok() {
            let _ = wait.recv();
        }
    }
}

/// What a write replaces: a later write to the same target supersedes an earlier one.
#[derive(PartialEq, Eq, Hash)]
enum Target<'a> {
    Cluster(&'a ClusterId),
    Set(&'a SetKey),
    Positions(&'a ClusterId),
}

fn target(write: &Write) -> Target<'_> {
    match write {
        Write::Cluster { cluster, .. } => Target::Cluster(cluster),
        Write::Set { key, .. } => Target::Set(key),
        Write::Positions { cluster, .. } => Target::Positions(cluster),
    }
}

/// Keeps only the last write to each target, in the order of those last writes. Every
/// write carries its target's whole record (a cluster's status, a set's status, all of a
/// cluster's positions), so the last one holds everything the earlier ones did.
fn coalesce(pending: &mut Vec<Write>) {
    let keep: Vec<bool> = {
        let mut seen = HashSet::new();
        let mut keep: Vec<bool> = pending
            .iter()
            .rev()
            .map(|w| seen.insert(target(w)))
            .collect();
        keep.reverse();
        keep
    };
    let mut keep = keep.into_iter();
    pending.retain(|_| keep.next().unwrap_or(true));
}

#[cfg(test)]
mod tests;

//! Batch verification of concurrent heartbeats' signatures (on by default;
//! `fleetpulse-hub serve --batch-verify=false` verifies each with `verify_strict`).
//!
//! The first heartbeat to arrive at an empty queue starts a batch; heartbeats arriving
//! within [`BatchSettings::max_wait`] join it, and once [`BatchSettings::max_batch`] have
//! joined (or the wait is over) one task verifies every signature queued by then together
//! with [`verify_many`], about twice as fast per signature as one `verify_strict` each.
//! Each heartbeat waits at most `max_wait` longer for its answer, which is nothing against
//! a heartbeat interval of seconds. Liveness still counts from the time a report was
//! received.
//!
//! The signal that a batch is full belongs to that batch alone (a `oneshot` made with it),
//! so a batch that filled while its task was not yet running leaves nothing behind for
//! the next one: every batch waits for its own signatures. What was queued when the task
//! runs is verified whole, so under a burst the batches grow past `max_batch`, where the
//! cost per signature falls further.
//!
//! What batching changes about the accepted signatures (nothing an outsider could use) is
//! in the docs of [`fleetpulse_common::protocol::jws::batch`]; a batch of one is a plain
//! `verify_strict`, and a refusal is always a strict refusal.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use ed25519_dalek::Signature;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use fleetpulse_common::protocol::jws::batch::{Item, verify_many};
use fleetpulse_common::protocol::keys::StrongKey;

use crate::metrics::BatchCounters;

/// How signatures are batched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSettings {
    /// Signatures that close a batch (beyond 16 a batch gains little per signature until
    /// about 96, and a batch holds a runtime thread for its whole verification).
    pub max_batch: usize,
    /// Longest a heartbeat waits for others to join its batch.
    pub max_wait: Duration,
}

impl Default for BatchSettings {
    /// At most 32 signatures, waiting at most 10 ms.
    fn default() -> Self {
        Self {
            max_batch: 32,
            max_wait: Duration::from_millis(10),
        }
    }
}

struct Job {
    message: Bytes,
    signature: Signature,
    key: StrongKey,
    done: oneshot::Sender<bool>,
}

/// The signatures waiting, and the signal that closes their batch early.
#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    /// Sent once `jobs` holds `max_batch`; taken then, so it is sent at most once.
    full: Option<oneshot::Sender<()>>,
}

/// Collects signatures into batches and verifies them on the async runtime.
pub struct BatchVerifier {
    settings: BatchSettings,
    queue: Mutex<Queue>,
    counters: BatchCounters,
}

impl BatchVerifier {
    /// A verifier with `settings`, counting its batches in `counters`.
    pub fn new(settings: BatchSettings, counters: BatchCounters) -> Arc<Self> {
        Arc::new(Self {
            settings,
            queue: Mutex::new(Queue::default()),
            counters,
        })
    }

    /// Whether `signature` over `message` verifies with `key`, decided in a batch with the
    /// signatures that arrive meanwhile. Cancel-safe: dropping the future leaves the batch
    /// to the others.
    pub async fn verify(
        self: &Arc<Self>,
        message: Bytes,
        signature: Signature,
        key: StrongKey,
    ) -> bool {
        let (done, verdict) = oneshot::channel();
        let job = Job {
            message,
            signature,
            key,
            done,
        };
        let started = {
            let mut queue = self.queue.lock();
            queue.jobs.push(job);
            let started = (queue.jobs.len() == 1).then(|| {
                let (full, filled) = oneshot::channel();
                queue.full = Some(full);
                filled
            });
            if queue.jobs.len() >= self.settings.max_batch
                && let Some(full) = queue.full.take()
            {
                let _ = full.send(());
            }
            started
        };
        if let Some(filled) = started {
            // A task of its own, so that the batch is verified even if this request is
            // dropped while it waits.
            let this = self.clone();
            tokio::spawn(async move { this.run_batch(filled).await });
        }
        verdict.await.unwrap_or(false)
    }

    async fn run_batch(&self, filled: oneshot::Receiver<()>) {
        let _ = tokio::time::timeout(self.settings.max_wait, filled).await;
        // The queue taken whole: the next signature starts a batch of its own.
        let Queue { jobs, .. } = std::mem::take(&mut *self.queue.lock());
        self.counters.batches.inc();
        self.counters.signatures.inc_by(jobs.len() as u64);
        let items: Vec<Item<'_>> = jobs
            .iter()
            .map(|j| Item {
                message: &j.message,
                signature: &j.signature,
                key: &j.key,
            })
            .collect();
        let started = thread_cpu();
        let verdicts = verify_many(&items);
        let spent = thread_cpu().saturating_sub(started);
        self.counters.cpu_seconds.inc_by(spent.as_secs_f64());
        drop(items);
        for (job, verdict) in jobs.into_iter().zip(verdicts) {
            let _ = job.done.send(verdict);
        }
    }
}

/// The CPU time the calling thread has run: a batch's cost without the time its thread
/// was preempted.
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::Signer;
    use fleetpulse_common::protocol::keys;

    #[tokio::test]
    async fn concurrent_signatures_are_verified_together_and_a_bad_one_is_refused() {
        let verifier = BatchVerifier::new(
            BatchSettings {
                max_batch: 4,
                max_wait: Duration::from_secs(5),
            },
            BatchCounters::default(),
        );
        let calls = (0..4).map(|i| {
            let key = keys::generate();
            let message = format!("e30.report-{i}").into_bytes();
            let signature = key.sign(&message);
            let sent = if i == 2 {
                b"tampered".to_vec()
            } else {
                message
            };
            let verifier = verifier.clone();
            async move {
                verifier
                    .verify(Bytes::from(sent), signature, StrongKey::of(&key))
                    .await
            }
        });
        // Four jobs fill the batch, so it runs at once rather than after max_wait.
        let verdicts = futures::future::join_all(calls).await;
        assert_eq!(verdicts, [true, true, false, true]);
    }

    fn signed(text: &str) -> (Bytes, Signature, StrongKey) {
        let key = keys::generate();
        let message = text.as_bytes().to_vec();
        let signature = key.sign(&message);
        (Bytes::from(message), signature, StrongKey::of(&key))
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_that_filled_before_it_ran_leaves_the_next_batch_its_full_wait() {
        let wait = Duration::from_secs(1);
        let counters = BatchCounters::default();
        let verifier = BatchVerifier::new(
            BatchSettings {
                max_batch: 2,
                max_wait: wait,
            },
            counters.clone(),
        );
        let verify = |text: &str| {
            let (message, signature, key) = signed(text);
            let verifier = verifier.clone();
            async move { verifier.verify(message, signature, key).await }
        };
        // The first signature's batch task starts waiting for company.
        let first = tokio::spawn(verify("e30.a"));
        tokio::task::yield_now().await;
        // Two more join in one step: the second fills the batch, the third comes before
        // the batch's task ran, and both ride in it.
        let (second, third) = futures::join!(verify("e30.b"), verify("e30.c"));
        assert!(second && third && first.await.unwrap());
        assert_eq!((counters.batches.get(), counters.signatures.get()), (1, 3));
        // A lone signature after that waits the whole window for others: nothing of the
        // full batch before may close its batch early.
        let start = tokio::time::Instant::now();
        assert!(verify("e30.d").await);
        assert!(
            start.elapsed() >= wait,
            "closed after {:?}",
            start.elapsed()
        );
        assert_eq!((counters.batches.get(), counters.signatures.get()), (2, 4));
    }
}

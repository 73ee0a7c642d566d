//! Batch verification of concurrent heartbeats' signatures (on by default;
//! `fleetpulse-hub serve --batch-verify=false` verifies each with `verify_strict`).
//!
//! The first heartbeat to arrive at an empty queue starts a batch; heartbeats arriving
//! within [`BatchSettings::max_wait`] join it (up to [`BatchSettings::max_batch`]), and one
//! task verifies them together with [`verify_many`], about twice as fast per signature as
//! one `verify_strict` each. Each heartbeat waits at most `max_wait` longer for its
//! answer, which is nothing against a heartbeat interval of seconds. Liveness still counts
//! from the time a report was received.
//!
//! What batching changes about the accepted signatures (nothing an outsider could use) is
//! in the docs of [`fleetpulse_common::protocol::jws::batch`]; a batch of one is a plain
//! `verify_strict`, and a refusal is always a strict refusal.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use ed25519_dalek::{Signature, VerifyingKey};
use parking_lot::Mutex;
use tokio::sync::{Notify, oneshot};

use fleetpulse_common::protocol::jws::batch::{Item, verify_many};

/// How signatures are batched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSettings {
    /// Most signatures in one batch (beyond 16 a batch gains little per signature, and a
    /// batch holds a runtime thread for its whole verification).
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
    key: VerifyingKey,
    done: oneshot::Sender<bool>,
}

/// Collects signatures into batches and verifies them on the async runtime.
pub struct BatchVerifier {
    settings: BatchSettings,
    queue: Mutex<Vec<Job>>,
    full: Notify,
}

impl BatchVerifier {
    /// A verifier with `settings`.
    pub fn new(settings: BatchSettings) -> Arc<Self> {
        Arc::new(Self {
            settings,
            queue: Mutex::new(Vec::new()),
            full: Notify::new(),
        })
    }

    /// Whether `signature` over `message` verifies with `key`, decided in a batch with the
    /// signatures that arrive meanwhile. Cancel-safe: dropping the future leaves the batch
    /// to the others.
    pub async fn verify(
        self: &Arc<Self>,
        message: Bytes,
        signature: Signature,
        key: VerifyingKey,
    ) -> bool {
        let (done, verdict) = oneshot::channel();
        let job = Job {
            message,
            signature,
            key,
            done,
        };
        let (first, full) = {
            let mut queue = self.queue.lock();
            queue.push(job);
            (queue.len() == 1, queue.len() >= self.settings.max_batch)
        };
        if first {
            // A task of its own, so that the batch is verified even if this request is
            // dropped while it waits.
            let this = self.clone();
            tokio::spawn(async move { this.run_batch().await });
        }
        if full {
            self.full.notify_one();
        }
        verdict.await.unwrap_or(false)
    }

    async fn run_batch(&self) {
        let _ = tokio::time::timeout(self.settings.max_wait, self.full.notified()).await;
        let jobs = std::mem::take(&mut *self.queue.lock());
        let items: Vec<Item<'_>> = jobs
            .iter()
            .map(|j| Item {
                message: &j.message,
                signature: &j.signature,
                key: &j.key,
            })
            .collect();
        let verdicts = verify_many(&items);
        drop(items);
        for (job, verdict) in jobs.into_iter().zip(verdicts) {
            let _ = job.done.send(verdict);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::Signer;
    use fleetpulse_common::protocol::keys;

    #[tokio::test]
    async fn concurrent_signatures_are_verified_together_and_a_bad_one_is_refused() {
        let verifier = BatchVerifier::new(BatchSettings {
            max_batch: 4,
            max_wait: Duration::from_secs(5),
        });
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
                    .verify(Bytes::from(sent), signature, key.verifying_key())
                    .await
            }
        });
        // Four jobs fill the batch, so it runs at once rather than after max_wait.
        let verdicts = futures::future::join_all(calls).await;
        assert_eq!(verdicts, [true, true, false, true]);
    }
}

//! Hand agents driven at an interval through the agent's own hub client
//! ([`HttpHubClient`]: it follows a replica's redirect to the owner of its cluster's shard
//! and keeps sending there until that refuses), each counting every answer it gets.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fleetpulse_agent::hub_client::{HttpHubClient, HubClient};

use super::HandAgent;

/// What the driven agents saw.
#[derive(Debug, Default)]
pub struct Tally {
    /// Heartbeats the hub accepted.
    pub accepted: AtomicU64,
    /// Heartbeats refused for good (an error that is not transient).
    pub refused: AtomicU64,
    /// Transient failures, retried soon: no answer, `503`, a redirect not followed.
    pub retried: AtomicU64,
    /// Milliseconds since the run's start at the latest accepted heartbeat.
    pub last_accepted_ms: AtomicU64,
}

impl Tally {
    /// Heartbeats accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Heartbeats refused for good so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Transient failures so far.
    pub fn retried(&self) -> u64 {
        self.retried.load(Ordering::Relaxed)
    }
}

/// Sends `agent`'s heartbeats through `hub` every `interval` (five times a second while
/// they fail transiently), counting answers in `tally` (times from `t0`), until `dead`.
pub async fn drive(
    mut agent: HandAgent,
    hub: HttpHubClient,
    interval: Duration,
    tally: Arc<Tally>,
    dead: Arc<AtomicBool>,
    t0: Instant,
) {
    let mut next = tokio::time::Instant::now();
    while !dead.load(Ordering::Relaxed) {
        tokio::time::sleep_until(next).await;
        match hub
            .send_heartbeat(agent.next_jws(false), Duration::from_secs(5))
            .await
        {
            Ok(answer) => {
                agent.apply_generation(answer.config_generation);
                tally.accepted.fetch_add(1, Ordering::Relaxed);
                let at = t0.elapsed().as_millis() as u64;
                tally.last_accepted_ms.fetch_max(at, Ordering::Relaxed);
                next += interval;
            }
            Err(e) if e.is_transient() => {
                tally.retried.fetch_add(1, Ordering::Relaxed);
                next = tokio::time::Instant::now() + Duration::from_millis(200);
            }
            Err(e) => {
                eprintln!("heartbeat refused: {e}");
                tally.refused.fetch_add(1, Ordering::Relaxed);
                next += interval;
            }
        }
        next = next.max(tokio::time::Instant::now());
    }
}

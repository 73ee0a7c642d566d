//! `Retry-After` on the paused clock: a 503 that carries one holds the next attempt back
//! exactly that long (capped), where a 503 without one is retried after the quick first
//! backoff step, as before.

use std::time::Duration;

use fleetpulse_common::protocol::errors::RejectCode;

use super::{Reply, WAIT, seqs_and_times, spawn_fake};
use crate::hub_client::retry_after::MAX_RETRY_AFTER;

#[tokio::test(start_paused = true)]
async fn a_503_with_retry_after_holds_the_next_attempt_back_that_long() {
    let (agent, hub) = spawn_fake([Reply::UnavailableFor(Duration::from_secs(2))]);
    let status = agent
        .wait_for(WAIT, |s| s.accepted_total >= 1)
        .await
        .unwrap();
    assert_eq!(
        seqs_and_times(&hub)[..2],
        [(1, Duration::ZERO), (2, Duration::from_secs(2))],
        "the retry waits the hub's two seconds, not the 100-200 ms backoff"
    );
    assert_eq!(status.consecutive_failures, 0);
    agent.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_503_without_retry_after_is_retried_after_the_quick_first_backoff() {
    let (agent, hub) = spawn_fake([Reply::Reject(RejectCode::Unavailable, None)]);
    agent
        .wait_for(WAIT, |s| s.accepted_total >= 1)
        .await
        .unwrap();
    let seen = seqs_and_times(&hub);
    assert_eq!(seen[1].0, 2);
    assert!(
        (Duration::from_millis(100)..=Duration::from_millis(200)).contains(&seen[1].1),
        "{seen:?}"
    );
    agent.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_longer_than_five_minutes_is_capped() {
    let (agent, hub) = spawn_fake([Reply::UnavailableFor(Duration::from_secs(3600))]);
    agent
        .wait_for(WAIT + MAX_RETRY_AFTER, |s| s.accepted_total >= 1)
        .await
        .unwrap();
    assert_eq!(seqs_and_times(&hub)[1], (2, MAX_RETRY_AFTER));
    agent.stop().await.unwrap();
}

//! Waiting for conditions with a deadline, so tests never assert after a fixed sleep.

use std::{future::Future, time::Duration};
use tokio::time::Instant;

/// Polls `probe` every 20 ms until it yields `Some`, or returns `None` once `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe().await {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

//! Waiting for a condition with a deadline. Tests poll state instead of sleeping a fixed
//! time; on timeout the error says what was awaited.

use std::time::{Duration, Instant};

/// Polls `condition` every 50 ms until it holds or `timeout` passes.
pub async fn until(
    what: &str,
    timeout: Duration,
    mut condition: impl FnMut() -> bool,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        if condition() {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Like [`until`], for synchronous tests (e.g. driving child processes).
pub fn blocking_until(
    what: &str,
    timeout: Duration,
    mut condition: impl FnMut() -> bool,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        if condition() {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Like [`until_some`], for synchronous tests: polls `probe` every 100 ms until it yields
/// `Some`; returns the value and how long it took.
pub fn blocking_until_some<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> anyhow::Result<(T, Duration)> {
    let start = Instant::now();
    loop {
        if let Some(value) = probe() {
            return Ok((value, start.elapsed()));
        }
        if start.elapsed() > timeout {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Polls the async `probe` every 100 ms until it yields `Some` or `timeout` passes; returns
/// the value and how long it took. For conditions that need an API call to read (e.g. an
/// object's status on a simulated cluster).
pub async fn until_some<T, Fut>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Fut,
) -> anyhow::Result<(T, Duration)>
where
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = probe().await {
            return Ok((value, start.elapsed()));
        }
        if start.elapsed() > timeout {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

//! Following one check pod from creation to its end: polls it until it succeeds, fails,
//! is clearly not going to start (see [`super::status`]), or the run times out; then reads
//! the tail of the log that explains a failure.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::time::Instant;

use super::api::PodApi;
use super::settings::RunnerSettings;
use super::status::{PodProgress, StartWait, observe, started_container};
use crate::checks::probe::format_timeout;

/// How a watched pod ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    /// Whether the run succeeded.
    pub success: bool,
    /// What happened, without the log.
    pub detail: String,
    /// The container whose log explains a failure.
    pub log_container: Option<String>,
    /// Whether the pod reached phase `Failed` (worth keeping for `kubectl describe`).
    pub reached_failed_phase: bool,
}

impl Finished {
    fn failure(detail: String, log_container: Option<String>) -> Self {
        Self {
            success: false,
            detail,
            log_container,
            reached_failed_phase: false,
        }
    }
}

/// Polls pod `name` every `settings.poll_interval` until it ends or `run_timeout` has
/// passed since `started`.
pub async fn watch<A: PodApi>(
    api: &A,
    namespace: &str,
    name: &str,
    started: Instant,
    run_timeout: Duration,
    settings: &RunnerSettings,
) -> Finished {
    let deadline = started + run_timeout;
    let mut stuck_since: Option<Instant> = None;
    let mut last_detail = "Pending".to_owned();
    let mut last_pod: Option<Pod> = None;
    let mut last_error: Option<String>;
    loop {
        let now = Instant::now();
        match tokio::time::timeout(settings.api_timeout, api.get(namespace, name)).await {
            Ok(Ok(Some(pod))) => {
                last_error = None;
                match observe(&pod) {
                    PodProgress::Succeeded => {
                        return Finished {
                            success: true,
                            detail: "succeeded".to_owned(),
                            log_container: None,
                            reached_failed_phase: false,
                        };
                    }
                    PodProgress::Failed {
                        detail,
                        log_container,
                    } => {
                        return Finished {
                            reached_failed_phase: true,
                            ..Finished::failure(detail, log_container)
                        };
                    }
                    PodProgress::NotStarting { detail, wait, .. } => {
                        // Measured from the first of an unbroken series of start failures:
                        // the kubelet alternates ErrImagePull and ImagePullBackOff.
                        let since = match wait {
                            StartWait::UntilTimeout => None,
                            _ => Some(*stuck_since.get_or_insert(now)),
                        };
                        stuck_since = since;
                        let lasted =
                            since.map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
                        let give_up = match wait {
                            StartWait::FailNow => true,
                            StartWait::Grace => lasted >= settings.start_grace,
                            StartWait::UntilTimeout => false,
                        };
                        if give_up {
                            let detail = if lasted.is_zero() {
                                detail
                            } else {
                                format!("{detail} (for {})", format_timeout(whole_secs(lasted)))
                            };
                            return Finished::failure(detail, started_container(&pod));
                        }
                        last_detail = detail;
                    }
                    PodProgress::InProgress { detail } => {
                        stuck_since = None;
                        last_detail = detail;
                    }
                }
                last_pod = Some(pod);
            }
            Ok(Ok(None)) => {
                return Finished::failure(
                    "the pod disappeared before it finished (deleted by someone else, or \
                     evicted and removed)"
                        .to_owned(),
                    None,
                );
            }
            Ok(Err(error)) => {
                tracing::warn!(namespace, pod = name, %error, "cannot read check pod");
                last_error = Some(error.to_string());
            }
            Err(_elapsed) => {
                last_error = Some(format!(
                    "reading the pod timed out after {}",
                    format_timeout(settings.api_timeout)
                ));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            let mut detail = format!(
                "did not finish within {}; last seen: {last_detail}",
                format_timeout(run_timeout)
            );
            if let Some(error) = last_error {
                detail.push_str(&format!("; last error: {error}"));
            }
            return Finished::failure(detail, last_pod.as_ref().and_then(started_container));
        }
        tokio::time::sleep_until(deadline.min(now + settings.poll_interval)).await;
    }
}

/// `; last log lines of "c":\n...` for a failed run's message, or why there are none.
pub async fn log_tail<A: PodApi>(
    api: &A,
    namespace: &str,
    pod: &str,
    container: &str,
    settings: &RunnerSettings,
) -> String {
    let lines = settings.log_tail_lines;
    let read = api.log_tail(namespace, pod, container, lines);
    match tokio::time::timeout(settings.api_timeout, read).await {
        Ok(Ok(log)) => {
            let tail = cap_tail(&log, lines as usize, settings.log_tail_bytes);
            if tail.is_empty() {
                format!("; container {container:?} logged nothing")
            } else {
                format!("; last log lines of {container:?}:\n{tail}")
            }
        }
        Ok(Err(error)) => format!("; log unavailable: {error}"),
        Err(_elapsed) => "; log unavailable: reading it timed out".to_owned(),
    }
}

/// The last `max_lines` lines of `log`, and of those at most the last `max_bytes` bytes
/// (cut at a character boundary, marked with `...`).
pub fn cap_tail(log: &str, max_lines: usize, max_bytes: usize) -> String {
    let trimmed = log.trim_end();
    let lines: Vec<&str> = trimmed.lines().collect();
    let tail = lines[lines.len().saturating_sub(max_lines)..].join("\n");
    if tail.len() <= max_bytes {
        return tail;
    }
    let mut start = tail.len() - max_bytes;
    while !tail.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &tail[start..])
}

fn whole_secs(duration: Duration) -> Duration {
    Duration::from_secs(duration.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines() {
        let log: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let tail = cap_tail(&log, 20, 1024);
        assert!(
            tail.starts_with("line 11\n") && tail.ends_with("line 30"),
            "{tail}"
        );
    }

    #[test]
    fn tail_is_capped_in_bytes_at_a_char_boundary() {
        let log = "é".repeat(1000);
        let tail = cap_tail(&log, 20, 11);
        assert_eq!(tail, format!("...{}", "é".repeat(5)));
    }
}

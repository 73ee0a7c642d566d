//! [`PodCheckRunner`]: runs one pod check on its schedule and keeps its verdict.
//!
//! Every `intervalSeconds` (default 60, start to start; a run longer than that delays the
//! next) it creates a pod from the template ([`super::template`]), follows it until it
//! ends or `runTimeoutSeconds` (default 120) pass ([`super::watch`]), records the result
//! in a [`SuccessWindow`] and deletes the pod. [`PodCheckRunner::outcome`] answers at any
//! time with the window's verdict.
//!
//! Decisions:
//! - A run whose pod cannot be created (RBAC, missing namespace, invalid template) is a
//!   failed run: the check proves the cluster can run pods, and it cannot.
//! - Pods that succeeded, never started, or timed out are deleted at once. The last pod
//!   that reached phase `Failed` is kept for `kubectl describe` / `kubectl logs` until the
//!   next run ends (then it is deleted, and a newer failed pod may take its place), so at
//!   most one finished pod per check remains.
//! - At start the runner deletes every pod with its check's labels: the leftovers of an
//!   earlier agent (kept failed pods, runs cut short by a restart). Two agents running the
//!   same check at once (a rollout) may delete each other's run pods; that run fails once.
//! - When the run loop is cancelled mid-run, the run's pod is deleted (best effort).

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use fleetpulse_common::api::check::PodCheck;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::api::PodApi;
use super::settings::RunnerSettings;
use super::template::{build_pod, check_selector};
use super::watch::{log_tail, watch};
use super::window::SuccessWindow;
use crate::checks::RunOutcome;
use crate::checks::probe::format_timeout;

/// The result of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunReport {
    /// The round number (1 for the first run after the runner started).
    pub round: u64,
    /// The run's pod, when it was created.
    pub pod: Option<String>,
    /// Whether the run succeeded.
    pub success: bool,
    /// What happened, with the failed container's log tail.
    pub message: String,
}

/// Mutable state, behind a mutex never held across an `.await`.
struct State {
    window: SuccessWindow,
    last_failure: Option<RunReport>,
    kept_failed_pod: Option<String>,
    current_pod: Option<String>,
}

/// Runs one pod check and keeps its verdict.
pub struct PodCheckRunner<A: PodApi> {
    api: A,
    check: String,
    namespace: String,
    template: PodTemplateSpec,
    interval: Duration,
    run_timeout_seconds: u32,
    settings: RunnerSettings,
    state: Mutex<State>,
}

impl<A: PodApi> PodCheckRunner<A> {
    /// A runner for check `check` with spec `spec`; its pods run in `spec.namespace`, else
    /// in `default_namespace` (the agent's checks namespace).
    pub fn new(api: A, check: &str, spec: &PodCheck, default_namespace: &str) -> Self {
        let window = SuccessWindow::new(
            Duration::from_secs(spec.success_rate_seconds.unwrap_or(600).into()),
            spec.success_rate_threshold_percent.unwrap_or(80),
            spec.consecutive_failure_threshold.unwrap_or(3),
        );
        Self {
            api,
            check: check.to_owned(),
            namespace: spec
                .namespace
                .clone()
                .filter(|ns| !ns.is_empty())
                .unwrap_or_else(|| default_namespace.to_owned()),
            template: spec.template.clone(),
            interval: Duration::from_secs(spec.interval_seconds.unwrap_or(60).max(1).into()),
            run_timeout_seconds: spec.run_timeout_seconds.unwrap_or(120).max(1),
            settings: RunnerSettings::default(),
            state: Mutex::new(State {
                window,
                last_failure: None,
                kept_failed_pod: None,
                current_pod: None,
            }),
        }
    }

    /// The same runner with other knobs.
    pub fn with_settings(mut self, settings: RunnerSettings) -> Self {
        self.settings = settings;
        self
    }

    /// The check's name.
    pub fn check(&self) -> &str {
        &self.check
    }

    /// The namespace its pods run in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The current verdict, at tokio's clock.
    pub fn outcome(&self) -> RunOutcome {
        self.outcome_at(Instant::now())
    }

    /// The verdict at `now`: the window's, with the last failure's message when failing.
    pub fn outcome_at(&self, now: Instant) -> RunOutcome {
        let state = self.lock();
        let verdict = state.window.evaluate(now.into_std());
        let mut message = verdict.message;
        if let (false, Some(failure)) = (verdict.passing, &state.last_failure) {
            message = format!("{message}; last failure: {}", failure.message);
        }
        RunOutcome {
            passing: verdict.passing,
            message,
            success_rate_percent: verdict.success_rate_percent,
        }
    }

    /// Deletes leftovers, then runs a round every interval until `shutdown` is cancelled.
    pub async fn run(&self, shutdown: CancellationToken) {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = self.cleanup_leftovers() => {}
        }
        for round in 1.. {
            let started = Instant::now();
            tokio::select! {
                () = shutdown.cancelled() => {
                    self.abandon_current_pod().await;
                    return;
                }
                _ = self.run_round(round) => {}
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep_until(started + self.interval) => {}
            }
        }
    }

    /// Deletes every pod of this check (any round, any earlier agent); returns how many
    /// were deleted. Errors are logged: leftovers do not stop the check.
    pub async fn cleanup_leftovers(&self) -> usize {
        let selector = check_selector(&self.check);
        let listed = tokio::time::timeout(
            self.settings.api_timeout,
            self.api.list(&self.namespace, &selector),
        )
        .await;
        let pods = match listed {
            Ok(Ok(pods)) => pods,
            Ok(Err(error)) => {
                tracing::warn!(check = %self.check, %error, "cannot list leftover check pods");
                return 0;
            }
            Err(_elapsed) => return 0,
        };
        let mut deleted = 0;
        for name in pods.into_iter().filter_map(|pod| pod.metadata.name) {
            if self.delete_pod(&name).await {
                deleted += 1;
            }
        }
        if deleted > 0 {
            tracing::info!(check = %self.check, namespace = %self.namespace, deleted, "deleted leftover check pods");
        }
        deleted
    }

    /// Runs round `round`: one pod, followed to its end, recorded in the window.
    pub async fn run_round(&self, round: u64) -> RunReport {
        let started = Instant::now();
        let (pod, success, message, keep) = self.run_pod(round, started).await;
        let elapsed = format_timeout(Duration::from_secs(started.elapsed().as_secs()));
        let on_pod = pod
            .as_deref()
            .map(|p| format!(" (pod {p})"))
            .unwrap_or_default();
        let message = if success {
            format!("run {round}{on_pod} succeeded in {elapsed}")
        } else {
            format!("run {round}{on_pod} failed: {message}")
        };
        tracing::info!(check = %self.check, namespace = %self.namespace, round, pod = ?pod, success, "pod check run finished");
        let report = RunReport {
            round,
            pod: pod.clone(),
            success,
            message,
        };
        // Finished pods go; the last one that reached `Failed` stays until the next run ends.
        let previous = self.lock().kept_failed_pod.take();
        for name in previous.iter().chain(pod.iter().filter(|_| !keep)) {
            self.delete_pod(name).await;
        }
        let mut state = self.lock();
        state.current_pod = None;
        if keep {
            state.kept_failed_pod = pod;
        }
        state.window.record(Instant::now().into_std(), success);
        if !success {
            state.last_failure = Some(report.clone());
        }
        report
    }

    /// Creates and follows the pod: `(pod name, success, message, keep the pod)`.
    async fn run_pod(&self, round: u64, started: Instant) -> (Option<String>, bool, String, bool) {
        let pod = match build_pod(
            &self.check,
            &self.namespace,
            &self.template,
            round,
            self.run_timeout_seconds,
        ) {
            Ok(pod) => pod,
            Err(error) => return (None, false, format!("invalid pod check: {error}"), false),
        };
        let created = tokio::time::timeout(
            self.settings.api_timeout,
            self.api.create(&self.namespace, &pod),
        )
        .await;
        let name = match created {
            Ok(Ok(pod)) => pod.metadata.name.unwrap_or_default(),
            Ok(Err(error)) => return (None, false, error.to_string(), false),
            Err(_elapsed) => {
                let timeout = format_timeout(self.settings.api_timeout);
                return (
                    None,
                    false,
                    format!("creating the pod timed out after {timeout}"),
                    false,
                );
            }
        };
        self.lock().current_pod = Some(name.clone());
        let run_timeout = Duration::from_secs(self.run_timeout_seconds.into());
        let api = &self.api;
        let end = watch(
            api,
            &self.namespace,
            &name,
            started,
            run_timeout,
            &self.settings,
        )
        .await;
        if end.success {
            return (Some(name), true, end.detail, false);
        }
        let mut message = end.detail;
        if let Some(container) = &end.log_container {
            let tail = log_tail(&self.api, &self.namespace, &name, container, &self.settings);
            message.push_str(&tail.await);
        }
        (Some(name), false, message, end.reached_failed_phase)
    }

    /// Deletes the pod of a run cut short by shutdown.
    async fn abandon_current_pod(&self) {
        let current = self.lock().current_pod.take();
        if let Some(name) = current {
            self.delete_pod(&name).await;
        }
    }

    /// Deletes a pod; logs and returns false when that fails.
    async fn delete_pod(&self, name: &str) -> bool {
        let delete = self.api.delete(&self.namespace, name);
        match tokio::time::timeout(self.settings.api_timeout, delete).await {
            Ok(Ok(())) => true,
            Ok(Err(error)) => {
                tracing::warn!(check = %self.check, pod = name, %error, "cannot delete check pod; the next agent start retries");
                false
            }
            Err(_elapsed) => {
                tracing::warn!(check = %self.check, pod = name, "deleting check pod timed out");
                false
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

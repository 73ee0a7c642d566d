//! The check engine: runs the effective config's checks on their own schedule and keeps
//! each one's verdict ([`Tracker`]) for the heartbeat loop to report.
//!
//! Every check runs every `periodSeconds` (default: the heartbeat interval). Checks that
//! fall due together run as one round: Lua checks share one Lua state and one listing of
//! each distinct query; probes run concurrently. The API server's `/readyz` is checked
//! every interval whenever the agent has a Kubernetes API. A new config replaces the
//! checks at once; a check whose spec did not change keeps its verdict.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use fleetpulse_common::api::{CheckKind, CheckPhase, ClusterCheck};
use fleetpulse_common::lua::LuaLimits;
use fleetpulse_common::protocol::report::{AgentConfig, CheckResult};

use super::builtin::{self, APISERVER_CHECK};
use super::lua_check::{self, LuaCheck};
use super::pod::{KubePodApi, PodCheckRunner};
use super::resources::Reader;
use super::timing::{Timing, Tracker};
use super::{ChecksSource, RunOutcome, probe};
use crate::serve::metrics::AgentMetrics;

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Limits of each Lua evaluation.
    pub lua_limits: LuaLimits,
    /// Period of checks that set none, until a config says otherwise.
    pub default_period: Duration,
    /// Namespace pod checks run in when their spec names none.
    pub checks_namespace: String,
    /// Where each round's durations are recorded.
    pub metrics: AgentMetrics,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            lua_limits: LuaLimits::default(),
            default_period: Duration::from_secs(10),
            checks_namespace: DEFAULT_CHECKS_NAMESPACE.into(),
            metrics: AgentMetrics::default(),
        }
    }
}

/// Default namespace of pod checks.
pub const DEFAULT_CHECKS_NAMESPACE: &str = "fleetpulse-system";

/// A running pod check: its runner (which keeps its own schedule) and how to stop it.
struct PodCheck {
    spec: ClusterCheck,
    runner: Arc<PodCheckRunner<KubePodApi>>,
    stop: CancellationToken,
}

struct Scheduled {
    /// Shared with the rounds that run it: a round takes a handle, never a copy.
    check: Arc<ClusterCheck>,
    phase: CheckPhase,
    tracker: Tracker,
    next_run: Instant,
}

#[derive(Default)]
struct State {
    config: Arc<AgentConfig>,
    checks: Vec<Scheduled>,
    readyz: Option<(Tracker, Instant)>,
}

struct Shared {
    state: Mutex<State>,
    changed: Notify,
    options: EngineOptions,
    has_api: bool,
    /// The client pod checks create pods with (none without a Kubernetes API).
    pods_client: Option<kube::Client>,
    pod_checks: Mutex<BTreeMap<String, PodCheck>>,
    shutdown: CancellationToken,
}

/// The handle the heartbeat loop holds ([`ChecksSource`]).
#[derive(Clone)]
pub struct CheckEngine {
    shared: Arc<Shared>,
}

fn kind_of(check: &ClusterCheck) -> CheckKind {
    check.kinds().first().copied().unwrap_or(CheckKind::Lua)
}

impl CheckEngine {
    /// Starts the engine on the current runtime; it stops when `shutdown` is cancelled.
    pub fn spawn(
        reader: Reader,
        options: EngineOptions,
        shutdown: CancellationToken,
    ) -> CheckEngine {
        let now = Instant::now();
        let readyz = reader.has_api().then(|| {
            let timing = Timing {
                failure_threshold: 3,
                success_threshold: 1,
                for_duration: Duration::ZERO,
            };
            (
                Tracker::new(
                    APISERVER_CHECK,
                    CheckKind::ApiServer,
                    CheckPhase::Liveness,
                    timing,
                ),
                now,
            )
        });
        let pods_client = match &reader {
            Reader::Kube(k) => Some(k.client().clone()),
            _ => None,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                readyz,
                ..Default::default()
            }),
            changed: Notify::new(),
            has_api: reader.has_api(),
            options,
            pods_client,
            pod_checks: Mutex::new(BTreeMap::new()),
            shutdown: shutdown.clone(),
        });
        tokio::spawn(run(shared.clone(), reader, shutdown));
        CheckEngine { shared }
    }

    /// Whether the engine checks a Kubernetes API.
    pub fn has_api(&self) -> bool {
        self.shared.has_api
    }
}

impl ChecksSource for CheckEngine {
    fn results(&self) -> Vec<CheckResult> {
        let state = self.shared.state.lock();
        state
            .readyz
            .iter()
            .map(|(t, _)| t.result())
            .chain(state.checks.iter().map(|s| s.tracker.result()))
            .collect()
    }

    fn apply_config(&self, config: &AgentConfig) {
        let mut state = self.shared.state.lock();
        let mut old: BTreeMap<(bool, String), Scheduled> = std::mem::take(&mut state.checks)
            .into_iter()
            .map(|s| ((s.phase == CheckPhase::Readiness, s.check.name.clone()), s))
            .collect();
        let now = Instant::now();
        let lists = [
            (CheckPhase::Readiness, &config.readiness_checks),
            (CheckPhase::Liveness, &config.liveness_checks),
        ];
        for (phase, checks) in lists {
            for check in checks.iter() {
                let key = (phase == CheckPhase::Readiness, check.name.clone());
                let scheduled = match old.remove(&key) {
                    Some(s) if *s.check == *check => s,
                    _ => Scheduled {
                        tracker: Tracker::new(
                            &check.name,
                            kind_of(check),
                            phase,
                            Timing::of(check),
                        ),
                        check: Arc::new(check.clone()),
                        phase,
                        next_run: now,
                    },
                };
                state.checks.push(scheduled);
            }
        }
        state.config = Arc::new(config.clone());
        drop(state);
        self.shared.sync_pod_checks(config);
        self.shared.changed.notify_one();
    }
}

fn period(check: &ClusterCheck, config: &AgentConfig, default: Duration) -> Duration {
    check
        .period_seconds
        .map(|s| Duration::from_secs(s.into()))
        .or((config.interval_seconds > 0)
            .then(|| Duration::from_secs(config.interval_seconds.into())))
        .unwrap_or(default)
}

fn timeout(check: &ClusterCheck) -> Duration {
    Duration::from_secs(check.timeout_seconds.unwrap_or(5).into())
}

async fn run(shared: Arc<Shared>, reader: Reader, shutdown: CancellationToken) {
    loop {
        let now = Instant::now();
        let (due, readyz_due, config) = {
            let state = shared.state.lock();
            let due: Vec<(usize, Arc<ClusterCheck>)> = state
                .checks
                .iter()
                .enumerate()
                .filter(|(_, s)| s.next_run <= now)
                .map(|(i, s)| (i, Arc::clone(&s.check)))
                .collect();
            (
                due,
                state.readyz.as_ref().is_some_and(|(_, at)| *at <= now),
                state.config.clone(),
            )
        };
        let outcomes = run_round(&shared, &reader, &config, &due).await;
        let readyz = if readyz_due {
            Some(builtin::apiserver_readyz(&reader).await)
        } else {
            None
        };
        let wall = Timestamp::now();
        let next = {
            let mut state = shared.state.lock();
            let default = shared.options.default_period;
            let interval = period(&ClusterCheck::default(), &state.config, default);
            if let (Some(outcome), Some((tracker, at))) = (readyz, state.readyz.as_mut()) {
                tracker.record(&outcome, wall);
                *at = now + interval;
            }
            let state = &mut *state;
            for ((index, check), outcome) in due.iter().zip(outcomes) {
                // The config may have changed while the round ran: record only into the
                // same, unchanged check.
                if let Some(s) = state
                    .checks
                    .get_mut(*index)
                    .filter(|s| Arc::ptr_eq(&s.check, check))
                {
                    s.tracker.record(&outcome, wall);
                    s.next_run = now + period(check, &state.config, default);
                }
            }
            state
                .checks
                .iter()
                .map(|s| s.next_run)
                .chain(state.readyz.iter().map(|(_, at)| *at))
                .min()
        };
        let sleep = tokio::time::sleep_until(next.unwrap_or(now + shared.options.default_period));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = shared.changed.notified() => {}
            _ = sleep => {}
        }
    }
}

/// Runs the due checks once: Lua checks as one batch, everything else concurrently.
async fn run_round(
    shared: &Shared,
    reader: &Reader,
    config: &AgentConfig,
    due: &[(usize, Arc<ClusterCheck>)],
) -> Vec<RunOutcome> {
    let options = &shared.options;
    let round_started = Instant::now();
    let lua: Vec<LuaCheck> = due.iter().filter_map(|(_, c)| LuaCheck::of(c)).collect();
    let meta = &config.cluster_metadata;
    let (lua_outcomes, lua_memory) =
        lua_check::run_batch_measured(reader, meta, &lua, options.lua_limits).await;
    let mut lua_outcomes = lua_outcomes.into_iter();
    let lua_took = round_started.elapsed();
    let others = due
        .iter()
        .filter(|(_, c)| !c.is_lua())
        .map(|(_, c)| async move {
            let started = Instant::now();
            let outcome = match c.pod.is_some() {
                true => shared.pod_outcome(&c.name),
                false => run_one(reader, c).await,
            };
            (outcome, started.elapsed())
        });
    let mut other_outcomes = futures::future::join_all(others).await.into_iter();
    let mut took = Vec::with_capacity(due.len());
    let outcomes = due
        .iter()
        .map(|(_, c)| {
            let next = if c.is_lua() {
                lua_outcomes.next().map(|o| (o, lua_took))
            } else {
                other_outcomes.next()
            };
            let (outcome, duration) =
                next.unwrap_or_else(|| (RunOutcome::fail("internal: no outcome"), Duration::ZERO));
            took.push((c.name.as_str(), duration));
            outcome
        })
        .collect();
    let (round, lua_memory) = (
        round_started.elapsed(),
        (!lua.is_empty()).then_some(lua_memory),
    );
    options.metrics.check_round(took, round, lua_memory);
    outcomes
}

/// Runs one non-Lua check once.
pub async fn run_one(reader: &Reader, check: &ClusterCheck) -> RunOutcome {
    if let Some(p) = &check.http {
        probe::run_http(p, timeout(check)).await
    } else if let Some(p) = &check.tcp {
        probe::run_tcp(p, timeout(check)).await
    } else if let Some(c) = &check.ready_nodes {
        builtin::ready_nodes(reader, c).await
    } else if let Some(c) = &check.ready_pods {
        builtin::ready_pods(reader, c).await
    } else if check.pod.is_some() {
        RunOutcome::fail("pod checks run only in the engine, against a live cluster")
    } else {
        RunOutcome::fail(format!("check {} sets no kind it can run", check.name))
    }
}

impl Shared {
    /// Starts runners for new or changed pod checks and stops the rest.
    fn sync_pod_checks(&self, config: &AgentConfig) {
        let mut running = self.pod_checks.lock();
        let wanted: Vec<&ClusterCheck> = config
            .readiness_checks
            .iter()
            .chain(&config.liveness_checks)
            .filter(|c| c.pod.is_some())
            .collect();
        running.retain(|name, p| {
            let keep = wanted.iter().any(|c| &c.name == name && **c == p.spec);
            if !keep {
                p.stop.cancel();
            }
            keep
        });
        let Some(client) = &self.pods_client else {
            return;
        };
        for check in wanted {
            let Some(spec) = &check.pod else { continue };
            if running.contains_key(&check.name) {
                continue;
            }
            let runner = Arc::new(PodCheckRunner::new(
                KubePodApi::new(client.clone()),
                &check.name,
                spec,
                &self.options.checks_namespace,
            ));
            let stop = self.shutdown.child_token();
            tokio::spawn({
                let (runner, stop) = (runner.clone(), stop.clone());
                async move { runner.run(stop).await }
            });
            running.insert(
                check.name.clone(),
                PodCheck {
                    spec: check.clone(),
                    runner,
                    stop,
                },
            );
        }
    }

    /// The current verdict of a pod check's runner.
    fn pod_outcome(&self, name: &str) -> RunOutcome {
        match self.pod_checks.lock().get(name) {
            Some(p) => p.runner.outcome(),
            None => RunOutcome::fail(
                "pod checks need a Kubernetes API: run the agent in-cluster or pass --kubeconfig",
            ),
        }
    }
}

#[cfg(test)]
mod tests;

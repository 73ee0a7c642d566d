//! The check engine: runs the effective config's checks, each on its own schedule, and
//! keeps each one's verdict ([`Tracker`](super::timing::Tracker)) for the heartbeat loop
//! to report.
//!
//! Every check runs every `periodSeconds` (default: the heartbeat interval), counted from
//! the start of its previous run, and never twice at once. Each run happens in a task of
//! its own, so a slow check delays only itself; until a run ends, reports carry the
//! previous result (or "not run yet"), marked late once the run outlasts the period
//! ([`schedule`]). Lua checks that fall due together share one round (one Lua state, one
//! listing of each distinct query) under at most the agent's Lua deadline each; one that
//! needs longer (a larger `timeoutSeconds`) runs again at once in a round of its own, and
//! stays alone while it stays slow ([`dispatch`]). Each kind of round (the shared one,
//! each check alone) keeps its Lua state for the next, so an object that did not change
//! is not converted again. The API server's `/readyz` is checked
//! every interval whenever the agent has a Kubernetes API. A new config replaces the
//! checks at once; a check whose spec did not change keeps its verdict and its run in
//! progress.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use fleetpulse_common::checks::lua_batch::CheckRun;
use fleetpulse_common::checks::model::{Check, Kind};
use fleetpulse_common::lua::LuaLimits;
use fleetpulse_common::protocol::report::{AgentConfig, CheckResult};

use super::resources::cache::CacheOptions;
use super::resources::{CachedReader, Reader};
use super::{ChecksSource, RunOutcome, builtin, lua_check, probe};
use crate::metrics::AgentMetrics;

mod dispatch;
mod pods;
mod schedule;

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
    /// The watch-fed caches Lua checks read (with a Kubernetes API).
    pub cache: CacheOptions,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            lua_limits: LuaLimits::default(),
            default_period: Duration::from_secs(10),
            checks_namespace: DEFAULT_CHECKS_NAMESPACE.into(),
            metrics: AgentMetrics::default(),
            cache: CacheOptions::default(),
        }
    }
}

/// Default namespace of pod checks.
pub const DEFAULT_CHECKS_NAMESPACE: &str = "fleetpulse-system";

struct Shared {
    state: Mutex<schedule::State>,
    /// Woken by a new config and by every run that ends.
    changed: Notify,
    options: EngineOptions,
    has_api: bool,
    /// The client pod checks create pods with (none without a Kubernetes API).
    pods_client: Option<kube::Client>,
    pod_checks: Mutex<BTreeMap<String, pods::PodCheck>>,
    /// Where HTTP probes read header values from (Secrets of the checks namespace).
    secrets: probe::SecretSource,
    /// The watch-fed caches of what Lua checks select (with a Kubernetes API).
    watches: Option<CachedReader>,
    /// The Lua states rounds keep between them.
    lua_states: lua_check::KeptStates,
    shutdown: CancellationToken,
}

impl Shared {
    /// Records a run that ended, and wakes the loop to schedule the check's next one.
    fn finish(&self, due: &schedule::Due, run: &CheckRun, alone: bool) {
        self.state
            .lock()
            .finish(due, &run.outcome, Timestamp::now(), alone);
        self.changed.notify_one();
    }
}

/// The handle the heartbeat loop holds ([`ChecksSource`]).
#[derive(Clone)]
pub struct CheckEngine {
    shared: Arc<Shared>,
}

impl CheckEngine {
    /// Starts the engine on the current runtime; it stops when `shutdown` is cancelled.
    /// With a Kubernetes API, Lua checks read what they select from watch-fed caches
    /// ([`CachedReader`]), started and stopped as configs select kinds.
    pub fn spawn(
        reader: Reader,
        options: EngineOptions,
        shutdown: CancellationToken,
    ) -> CheckEngine {
        let reader = match reader {
            Reader::Kube(k) => {
                let cache = options.cache;
                Reader::Cached(CachedReader::new(k, cache, shutdown.child_token()))
            }
            other => other,
        };
        let (pods_client, watches) = match &reader {
            Reader::Kube(k) => (Some(k.client().clone()), None),
            Reader::Cached(c) => (Some(c.client().clone()), Some(c.clone())),
            _ => (None, None),
        };
        let state = schedule::State::new(reader.has_api(), options.default_period, Instant::now());
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            changed: Notify::new(),
            has_api: reader.has_api(),
            pods_client,
            pod_checks: Mutex::new(BTreeMap::new()),
            watches,
            lua_states: lua_check::KeptStates::default(),
            secrets: probe::SecretSource::new(reader.clone(), options.checks_namespace.clone()),
            options,
            shutdown: shutdown.clone(),
        });
        tokio::spawn(dispatch::run(shared.clone(), reader, shutdown));
        CheckEngine { shared }
    }

    /// Whether the engine checks a Kubernetes API.
    pub fn has_api(&self) -> bool {
        self.shared.has_api
    }
}

impl ChecksSource for CheckEngine {
    fn results(&self) -> Vec<CheckResult> {
        self.shared.state.lock().results(Instant::now())
    }

    fn apply_config(&self, config: &AgentConfig) {
        let checks: Vec<Arc<Check>> = {
            let mut state = self.shared.state.lock();
            state.apply(config, Instant::now(), Timestamp::now());
            state.checks().cloned().collect()
        };
        self.shared.sync_pod_checks(&checks);
        let alone: Vec<String> = checks
            .iter()
            .map(|c| dispatch::alone_round(&c.name))
            .collect();
        (self.shared.lua_states)
            .retain(|kind| kind == dispatch::SHARED_ROUND || alone.iter().any(|a| a == kind));
        if let Some(watches) = &self.shared.watches {
            let lua = checks.iter().filter_map(|c| c.lua().cloned()).collect();
            let built_ins: Vec<_> = checks
                .iter()
                .filter_map(|c| builtin::query(&c.kind))
                .collect();
            watches.watch_for(lua, &built_ins, &config.cluster_metadata);
        }
        self.shared.changed.notify_one();
    }
}

/// How long a probe may take: its `timeoutSeconds`, else 5 s.
fn timeout(check: &Check) -> Duration {
    check.timing.timeout.unwrap_or(Duration::from_secs(5))
}

/// Runs one non-Lua check once; an HTTP probe reads its headers' Secrets from `secrets`.
pub async fn run_one(reader: &Reader, secrets: &probe::SecretSource, check: &Check) -> RunOutcome {
    match &check.kind {
        Kind::Http(p) => probe::run_http_with(p, secrets, timeout(check)).await,
        Kind::Tcp(p) => probe::run_tcp(p, timeout(check)).await,
        Kind::ReadyNodes(c) => builtin::ready_nodes(reader, c).await,
        Kind::ReadyPods(c) => builtin::ready_pods(reader, c).await,
        Kind::Pod(_) => {
            RunOutcome::fail("pod checks run only in the engine, against a live cluster")
        }
        Kind::Lua(_) => RunOutcome::fail(format!(
            "check {} is a Lua check: it runs in a Lua round",
            check.name
        )),
    }
}

#[cfg(test)]
mod probe_secret_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod watch_tests;

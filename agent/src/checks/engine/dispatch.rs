//! Starting runs: the engine's loop wakes when a check falls due or a run ends, and starts
//! every due check in a task of its own, so no run waits for another. Lua checks due
//! together share one round (one Lua state, one listing of each query) under at most the
//! agent's Lua deadline each; one that needs longer runs again at once, and from then on,
//! in a round of its own with its full `timeoutSeconds`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use fleetpulse_common::checks::lua_batch::{Batch, CheckRun};
use fleetpulse_common::checks::model::Kind;
use fleetpulse_common::protocol::report::AgentConfig;

use super::super::builtin;
use super::super::lua_check::{self, LuaCheck};
use super::super::resources::Reader;
use super::schedule::Due;
use super::{Shared, run_one};

/// The engine's loop: starts due runs, then sleeps until the next check falls due, a run
/// ends, or the config changes.
pub(super) async fn run(shared: Arc<Shared>, reader: Reader, shutdown: CancellationToken) {
    loop {
        let now = Instant::now();
        let (due, readyz, config, next) = {
            let mut state = shared.state.lock();
            let (due, readyz) = state.take_due(now);
            (due, readyz, state.config.clone(), state.next_wake())
        };
        if readyz {
            tokio::spawn(check_readyz(shared.clone(), reader.clone(), now));
        }
        start(&shared, &reader, &config, due);
        let next = next.unwrap_or(now + shared.options.default_period);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = shared.changed.notified() => {}
            _ = tokio::time::sleep_until(next) => {}
        }
    }
}

/// Starts `due`: Lua checks that run in shared rounds as one round, every other run in a
/// task of its own.
fn start(shared: &Arc<Shared>, reader: &Reader, config: &Arc<AgentConfig>, due: Vec<Due>) {
    let mut together = Vec::new();
    for due in due {
        let (shared, reader) = (shared.clone(), reader.clone());
        match due.check.lua().cloned() {
            Some(lua) if due.alone => {
                tokio::spawn(lua_alone(shared, reader, config.clone(), due, lua));
            }
            Some(lua) => together.push((due, lua)),
            None => {
                tokio::spawn(other(shared, reader, due));
            }
        }
    }
    if !together.is_empty() {
        let round = lua_together(shared.clone(), reader.clone(), config.clone(), together);
        tokio::spawn(round);
    }
}

/// The kind of round whose Lua state the shared rounds keep ([`lua_check::KeptStates`]).
pub(super) const SHARED_ROUND: &str = "shared";

/// The kind of round whose Lua state check `name`'s rounds of its own keep.
pub(super) fn alone_round(name: &str) -> String {
    format!("alone/{name}")
}

/// Whether a run in a shared round that hit the round's deadline (`slice`) is run again
/// alone: when the check's own deadline is longer.
fn needs_own_round(run: &CheckRun, own_deadline: Duration, slice: Duration) -> bool {
    run.deadline_exceeded && own_deadline > slice
}

/// A shared round of Lua checks. Each result is recorded as soon as it is known; a check
/// that hit the round's deadline but may take longer runs again in a round of its own.
async fn lua_together(
    shared: Arc<Shared>,
    reader: Reader,
    config: Arc<AgentConfig>,
    group: Vec<(Due, Arc<LuaCheck>)>,
) {
    let limits = shared.options.lua_limits;
    let slice = limits.deadline;
    let own: Vec<Duration> = group
        .iter()
        .map(|(_, c)| c.deadline.unwrap_or(slice))
        .collect();
    let (dues, checks): (Vec<Due>, Vec<Arc<LuaCheck>>) = group.into_iter().unzip();
    let batch = Batch::plan(checks, &config.cluster_metadata).within(slice);
    let dues = Arc::new(dues);
    let started = Instant::now();
    let each = {
        let (shared, dues, own) = (shared.clone(), dues.clone(), own.clone());
        move |i: usize, run: &CheckRun| {
            if !needs_own_round(run, own[i], slice) {
                shared.finish(&dues[i], run, run.deadline_exceeded);
            }
        }
    };
    let state = shared.lua_states.take(SHARED_ROUND);
    let ran = lua_check::run_each(&reader, batch, limits, state, each).await;
    if let Some(state) = ran.state {
        shared.lua_states.put(SHARED_ROUND, state);
    }
    let (runs, memory) = (ran.runs, ran.lua_memory);
    let names = dues.iter().map(|d| d.check.name.as_str());
    let took = names.zip(runs.iter().map(|r| r.took));
    shared
        .options
        .metrics
        .check_round(took, started.elapsed(), Some(memory));
    for (i, run) in runs.iter().enumerate() {
        if !needs_own_round(run, own[i], slice) {
            continue;
        }
        let Some(lua) = dues[i].check.lua().cloned() else {
            continue;
        };
        let (shared, reader, config) = (shared.clone(), reader.clone(), config.clone());
        tokio::spawn(lua_alone(shared, reader, config, dues[i].clone(), lua));
    }
}

/// A Lua check in a round of its own, under its own deadline. It stays alone while its
/// runs take at least the shared rounds' deadline.
async fn lua_alone(
    shared: Arc<Shared>,
    reader: Reader,
    config: Arc<AgentConfig>,
    due: Due,
    lua: Arc<LuaCheck>,
) {
    let limits = shared.options.lua_limits;
    let started = Instant::now();
    let batch = Batch::plan(vec![lua], &config.cluster_metadata);
    let kind = alone_round(&due.check.name);
    let state = shared.lua_states.take(&kind);
    let ran = lua_check::run_each(&reader, batch, limits, state, |_, _| {}).await;
    if let Some(state) = ran.state {
        shared.lua_states.put(&kind, state);
    }
    let (runs, memory) = (ran.runs, ran.lua_memory);
    let took = started.elapsed();
    if let Some(run) = runs.first() {
        shared.finish(&due, run, run.deadline_exceeded || took >= limits.deadline);
    }
    let name = due.check.name.as_str();
    shared
        .options
        .metrics
        .check_round([(name, took)], took, Some(memory));
}

/// A probe, a built-in or a pod check's current verdict.
async fn other(shared: Arc<Shared>, reader: Reader, due: Due) {
    let started = Instant::now();
    let outcome = match due.check.kind {
        Kind::Pod(_) => shared.pod_outcome(&due.check.name),
        _ => run_one(&reader, &shared.secrets, &due.check).await,
    };
    let took = started.elapsed();
    let run = CheckRun {
        outcome,
        took,
        deadline_exceeded: false,
    };
    shared.finish(&due, &run, false);
    let name = due.check.name.as_str();
    shared
        .options
        .metrics
        .check_round([(name, took)], took, None);
}

/// The API server's `/readyz`.
async fn check_readyz(shared: Arc<Shared>, reader: Reader, started: Instant) {
    let outcome = builtin::apiserver_readyz(&reader).await;
    shared
        .state
        .lock()
        .finish_readyz(started, &outcome, Timestamp::now());
    shared.changed.notify_one();
}

//! Lua checks evaluated in batches that share one round: every selector of every check is
//! resolved for the cluster ([`Batch::plan`]), the caller lists each distinct query once
//! (the agent from its cluster's API, the hub from its own objects), and
//! [`Batch::evaluate`] (the one evaluator of Lua checks, for agent and hub alike) applies
//! the selectors' `evaluateCEL` and `evaluate` filters, takes each object into the round
//! once, and runs every check over its own objects. As in Sveltos, `resources` lists an
//! object once per selector that selects it. A script error or an exceeded limit fails
//! only its own check; [`Batch::evaluate_each`] hands out each check's run as soon as it
//! ends, and [`Batch::evaluate_kept`] runs a round on the Lua state an earlier round kept,
//! as the agent does.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::RunOutcome;
use super::cel::CelFilter;
use super::query::Query;
use crate::api::ResourceSelector;
use crate::compact::CompactObject;
use crate::lua::{CtxValue, LuaError, LuaLimits, LuaOutcome, LuaRound, ObjectId};

mod kept;
mod run;

pub use run::CheckRun;
use run::{Failed, finished};

/// What a Lua check runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Script {
    /// A `condition` defining `evaluate()` over `resources` and `ctx` (Sveltos).
    Condition(String),
    /// An Argo CD health script, run for every selected object.
    Health(String),
}

/// One Lua check to run (the Lua part of a [`super::model::Check`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LuaCheck {
    /// Check name.
    pub name: String,
    /// The script.
    pub script: Script,
    /// Which objects it sees.
    pub selectors: Vec<ResourceSelector>,
    /// Its own deadline (`timeoutSeconds`), instead of the round's.
    pub deadline: Option<Duration>,
}

/// A batch of checks with their selectors resolved.
#[derive(Debug)]
pub struct Batch {
    checks: Vec<Arc<LuaCheck>>,
    /// Each check's deadline: its own, or capped by [`Batch::within`]; `None`: the round's.
    deadlines: Vec<Option<Duration>>,
    resolved: Vec<Result<Vec<usize>, String>>,
    queries: Vec<Query>,
    /// Bytes the Lua state held after the last [`Batch::evaluate`].
    lua_memory: std::sync::atomic::AtomicUsize,
}

impl Batch {
    /// Resolves every check's selectors for the cluster described by `cluster`; a check
    /// whose selectors do not resolve will fail alone.
    pub fn plan(checks: Vec<Arc<LuaCheck>>, cluster: &ObjectMeta) -> Batch {
        let mut queries: Vec<Query> = Vec::new();
        let resolved = checks
            .iter()
            .map(|check| {
                let mut indices = Vec::with_capacity(check.selectors.len());
                for selector in &check.selectors {
                    let query = Query::resolve(selector, cluster)
                        .map_err(|e| format!("check {}: {e}", check.name))?;
                    let index = match queries.iter().position(|q| *q == query) {
                        Some(i) => i,
                        None => {
                            queries.push(query);
                            queries.len() - 1
                        }
                    };
                    indices.push(index);
                }
                Ok(indices)
            })
            .collect();
        Batch {
            deadlines: checks.iter().map(|c| c.deadline).collect(),
            checks,
            resolved,
            queries,
            lua_memory: Default::default(),
        }
    }

    /// This batch with no check's deadline longer than `cap` (a check without one of its
    /// own gets `cap`): a shared round that must end in time.
    pub fn within(mut self, cap: Duration) -> Batch {
        for deadline in &mut self.deadlines {
            *deadline = Some(deadline.unwrap_or(cap).min(cap));
        }
        self
    }

    /// How many checks it runs.
    pub fn len(&self) -> usize {
        self.checks.len()
    }

    /// Whether it runs no check.
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }

    /// Bytes the Lua state held after the last [`Batch::evaluate`] (0 before).
    pub fn lua_memory_bytes(&self) -> usize {
        self.lua_memory.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The distinct queries to list, once each.
    pub fn queries(&self) -> &[Query] {
        &self.queries
    }

    /// Evaluates every check; `listed[i]` holds the objects of `queries()[i]` (or why they
    /// could not be read). Returns one outcome per check, in order.
    pub fn evaluate(
        &self,
        listed: Vec<Result<Vec<Value>, String>>,
        limits: LuaLimits,
    ) -> Vec<RunOutcome> {
        let runs = self.evaluate_each(listed, limits, |_, _| {});
        runs.into_iter().map(|run| run.outcome).collect()
    }

    /// [`Batch::evaluate`], calling `each` with every check's run (its index and the run)
    /// as soon as it ends; returns every run, in order.
    pub fn evaluate_each(
        &self,
        listed: Vec<Result<Vec<Value>, String>>,
        limits: LuaLimits,
        each: impl FnMut(usize, &CheckRun),
    ) -> Vec<CheckRun> {
        self.round(listed, limits, each)
    }

    /// [`Batch::evaluate_each`] over objects kept as compact JSON text, as the agent lists
    /// them (a `Value` is made compact as it is taken in, which is all the difference).
    pub fn evaluate_compact_each(
        &self,
        listed: Vec<Result<Vec<CompactObject>, String>>,
        limits: LuaLimits,
        each: impl FnMut(usize, &CheckRun),
    ) -> Vec<CheckRun> {
        self.round(listed, limits, each)
    }

    /// [`Batch::evaluate_compact_each`] as the next round on `state` (a state kept from an
    /// earlier round, or [`LuaRound::new`]): an object taken in as the same text as in the
    /// state's last round (a clone of the same [`CompactObject`]: the same object version)
    /// keeps what was converted of it then; the object versions this round does not take
    /// in are let go of.
    pub fn evaluate_compact_in(
        &self,
        state: &mut LuaRound,
        listed: Vec<Result<Vec<CompactObject>, String>>,
        limits: LuaLimits,
        each: impl FnMut(usize, &CheckRun),
    ) -> Vec<CheckRun> {
        self.round_in(state, listed, limits, each)
    }

    /// One round over `listed`, whatever form its objects come in, on a state of its own.
    fn round<O: Into<CompactObject>>(
        &self,
        listed: Vec<Result<Vec<O>, String>>,
        limits: LuaLimits,
        mut each: impl FnMut(usize, &CheckRun),
    ) -> Vec<CheckRun> {
        match LuaRound::new(limits) {
            Ok(mut state) => self.round_in(&mut state, listed, limits, each),
            Err(e) => self.all_failed(&e, &mut each),
        }
    }

    /// Every check failed for `e`, before any ran.
    fn all_failed(&self, e: &LuaError, each: &mut impl FnMut(usize, &CheckRun)) -> Vec<CheckRun> {
        let failed = Failed::new(e.to_string());
        (0..self.checks.len())
            .map(|i| finished(i, Err(failed.clone()), Duration::ZERO, &mut *each))
            .collect()
    }

    /// One round over `listed` on `round`'s state.
    fn round_in<O: Into<CompactObject>>(
        &self,
        round: &mut LuaRound,
        listed: Vec<Result<Vec<O>, String>>,
        limits: LuaLimits,
        mut each: impl FnMut(usize, &CheckRun),
    ) -> Vec<CheckRun> {
        round.begin(limits);
        let selected = match self.take_objects(round, listed) {
            Ok(selected) => selected,
            Err(e) => return self.all_failed(&e, &mut each),
        };
        if let Err(e) = round.release_untaken() {
            return self.all_failed(&e, &mut each);
        }
        let round = &*round;
        // Sveltos' Lua filters, once per query (named after the first check using it).
        let mut filtered: HashMap<usize, Result<Vec<ObjectId>, Failed>> = HashMap::new();
        let mut runs = Vec::with_capacity(self.checks.len());
        for (i, (check, queries)) in self.checks.iter().zip(&self.resolved).enumerate() {
            let started = Instant::now();
            let deadline = self.deadlines[i].unwrap_or(limits.deadline);
            let verdict = (|| {
                let queries = queries.as_ref().map_err(|e| Failed::new(e.clone()))?;
                let mut per_query = Vec::with_capacity(queries.len());
                for &index in queries {
                    let ids = filtered
                        .entry(index)
                        .or_insert_with(|| {
                            self.filter(round, check, index, &selected[index], deadline)
                        })
                        .clone()?;
                    per_query.push((index, ids));
                }
                Ok(run(round, check, &self.queries, &per_query, deadline)?)
            })();
            runs.push(finished(i, verdict, started.elapsed(), &mut each));
        }
        self.lua_memory
            .store(round.lua_memory(), std::sync::atomic::Ordering::Relaxed);
        runs
    }

    /// Applies each query's `evaluateCEL` and takes every object into the round once;
    /// returns the ids per query (or why that query has none).
    fn take_objects<O: Into<CompactObject>>(
        &self,
        round: &mut LuaRound,
        listed: Vec<Result<Vec<O>, String>>,
    ) -> Result<Vec<Result<Vec<ObjectId>, String>>, LuaError> {
        let mut by_key: HashMap<String, ObjectId> = HashMap::new();
        let several = self.queries.len() > 1;
        let mut selected = Vec::with_capacity(listed.len());
        for (query, objects) in self.queries.iter().zip(listed) {
            let cel = match CelFilter::new(&query.evaluate_cel) {
                Ok(cel) => cel,
                Err(e) => {
                    selected.push(Err(e.to_string()));
                    continue;
                }
            };
            let objects = match objects {
                Ok(objects) => objects,
                Err(e) => {
                    selected.push(Err(e));
                    continue;
                }
            };
            let mut ids = Vec::with_capacity(objects.len());
            for object in objects {
                let object: CompactObject = object.into();
                // CEL reads whole objects: each is parsed for it alone, then dropped.
                if cel.as_ref().is_some_and(|f| !f.keeps(&object.to_value())) {
                    continue;
                }
                // An object listed by several queries is taken in once. One query lists each
                // object once: no key to read then.
                let id = if several {
                    let key = object_key(&object);
                    match by_key.get(&key) {
                        Some(id) => *id,
                        None => *by_key.entry(key).or_insert(round.add_compact(object)?),
                    }
                } else {
                    round.add_compact(object)?
                };
                ids.push(id);
            }
            selected.push(Ok(ids));
        }
        while selected.len() < self.queries.len() {
            selected.push(Err("objects were not listed".to_string()));
        }
        Ok(selected)
    }

    /// The objects of query `index` that its `evaluate` filter keeps.
    fn filter(
        &self,
        round: &LuaRound,
        check: &LuaCheck,
        index: usize,
        selected: &Result<Vec<ObjectId>, String>,
        deadline: Duration,
    ) -> Result<Vec<ObjectId>, Failed> {
        let query = &self.queries[index];
        let ids = selected.as_ref().map_err(|e| {
            Failed::new(format!("check {}: {} objects: {e}", check.name, query.kind))
        })?;
        let Some(script) = &query.evaluate else {
            return Ok(ids.clone());
        };
        let keep = round
            .filter(&check.name, script, ids, deadline)
            .map_err(|e| {
                let mut failed = Failed::from(e);
                failed.message = format!(
                    "{} (in the `evaluate` filter of the {} selector)",
                    failed.message, query.kind
                );
                failed
            })?;
        Ok(ids
            .iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|(id, _)| *id)
            .collect())
    }
}

/// Runs one check over its selectors' objects (`per_query`: query index and ids).
fn run(
    round: &LuaRound,
    check: &LuaCheck,
    queries: &[Query],
    per_query: &[(usize, Vec<ObjectId>)],
    deadline: Duration,
) -> Result<LuaOutcome, LuaError> {
    let resources: Vec<ObjectId> = per_query
        .iter()
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect();
    match &check.script {
        Script::Health(script) => round.health(&check.name, script, &resources, deadline),
        Script::Condition(condition) => {
            let mut ctx = Vec::new();
            for (index, ids) in per_query {
                let query = &queries[*index];
                if let Some(identifier) = &query.identifier {
                    match (query.names_one_object(), ids.first()) {
                        (true, Some(id)) => ctx.push((identifier.clone(), CtxValue::One(*id))),
                        (true, None) => {}
                        (false, _) => ctx.push((identifier.clone(), CtxValue::Many(ids.clone()))),
                    }
                }
            }
            round.evaluate_within(&check.name, condition, &resources, &ctx, deadline)
        }
    }
}

/// `apiVersion|kind|namespace|name`: an object selected by several queries is taken in once.
fn object_key(object: &CompactObject) -> String {
    let id = object.identity();
    format!(
        "{}|{}|{}|{}",
        id.api_version,
        id.kind,
        id.metadata.namespace.as_deref().unwrap_or_default(),
        id.metadata.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests;

//! The round the agent runs, through the code it runs it with: the Pods held by a
//! watch-fed cache's store ([`KindStore`], fed as a first list feeds it), ten Lua checks
//! selecting them planned as the engine plans a shared round ([`Batch::plan`], capped at
//! the round's deadline), the store read for each query, and the batch evaluated on the
//! Lua state the previous round kept ([`Batch::evaluate_kept`]). While the Pods do not
//! change, the store hands out the same texts every round, so each is parsed and
//! converted once, in the first round.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fleetpulse_common::api::ResourceSelector;
use fleetpulse_common::checks::lua_batch::{Batch, LuaCheck, Script};
use fleetpulse_common::checks::store::{Cached, Change, KindStore};
use fleetpulse_common::compact::CompactObject;
use fleetpulse_common::lua::{LuaLimits, LuaRound};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::pods::READY_PODS;

/// The agent's shared round of `checks` Lua checks over the Pods, kept from round to round.
pub struct AgentRound {
    store: KindStore,
    checks: Vec<Arc<LuaCheck>>,
    cluster: ObjectMeta,
    limits: LuaLimits,
    /// The Lua state the engine keeps for its shared rounds.
    state: Option<LuaRound>,
}

impl AgentRound {
    /// The store holding `pods` as a completed first list leaves it, `checks` checks
    /// (`ready-pods-0`, ...) selecting every Pod, no round run yet.
    pub fn new(pods: &[Value], checks: usize, limits: LuaLimits) -> AgentRound {
        let mut store = KindStore::default();
        store.apply(Change::Relist);
        for pod in pods {
            store.apply(Change::Listed(cached(pod)));
        }
        store.apply(Change::RelistDone);
        let selector = ResourceSelector {
            version: "v1".to_string(),
            kind: "Pod".to_string(),
            ..ResourceSelector::default()
        };
        let checks = (0..checks)
            .map(|i| {
                Arc::new(LuaCheck {
                    name: format!("ready-pods-{i}"),
                    script: Script::Condition(READY_PODS.to_string()),
                    selectors: vec![selector.clone()],
                    deadline: None,
                })
            })
            .collect();
        AgentRound {
            store,
            checks,
            cluster: ObjectMeta::default(),
            limits,
            state: None,
        }
    }

    /// One round: planned, read from the store, evaluated on the kept state. Every check
    /// must pass.
    pub fn run(&mut self) {
        let batch = Batch::plan(self.checks.clone(), &self.cluster).within(self.limits.deadline);
        let listed = batch
            .queries()
            .iter()
            .map(|query| Ok(self.store.select(query)))
            .collect();
        let runs = batch.evaluate_kept(&mut self.state, listed, self.limits, |_, _| {});
        for run in &runs {
            assert!(run.outcome.passing, "{}", run.outcome.message);
        }
    }

    /// Bytes the kept Lua state holds.
    pub fn lua_memory(&self) -> usize {
        self.state.as_ref().map_or(0, LuaRound::lua_memory)
    }
}

/// A deadline far away: on a loaded machine a slow run is a figure, not a failure.
pub fn patient_limits() -> LuaLimits {
    LuaLimits {
        deadline: Duration::from_secs(30),
        ..LuaLimits::default()
    }
}

/// `pod` as the agent's watch hands it to the store.
fn cached(pod: &Value) -> Cached {
    let meta = &pod["metadata"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let labels: BTreeMap<String, String> = meta["labels"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), text(v))).collect())
        .unwrap_or_default();
    Cached {
        namespace: text(&meta["namespace"]),
        name: text(&meta["name"]),
        uid: text(&meta["uid"]),
        resource_version: text(&meta["resourceVersion"]),
        labels,
        deleting: false,
        object: CompactObject::from(pod.clone()),
    }
}

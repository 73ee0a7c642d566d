//! The engine's Lua checks read through watch-fed caches of a real (simulated) API server:
//! a config change starts and stops watches, a kind whose cache has not synced fails its
//! check saying so, and a check that changes the objects it sees changes them for no
//! other check, in its round or the next.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use fleetpulse_common::api::{ClusterCheck, ReadyNodesCheck, ReadyPodsCheck, ResourceSelector};
use fleetpulse_common::checks::lua_batch::{Batch, LuaCheck, Script};
use fleetpulse_common::lua::LuaLimits;
use fleetpulse_kubesim::{KubeSim, eventually};

use super::tests::results_when;
use super::*;
use crate::checks::lua_check::{run_batch, run_each};
use crate::checks::resources::KubeReader;

const DEADLINE: Duration = Duration::from_secs(20);

/// Counts what it sees: `N Pod` (or `N Node`).
const COUNT: &str = r#"
function evaluate()
  local kind = resources[1] and resources[1].kind or "none"
  return { pass = true, message = #resources .. " " .. kind }
end
"#;

fn counting(name: &str, kind: &str) -> ClusterCheck {
    ClusterCheck {
        name: name.into(),
        resource_selectors: vec![ResourceSelector {
            version: "v1".into(),
            kind: kind.into(),
            ..Default::default()
        }],
        condition: Some(COUNT.into()),
        ..Default::default()
    }
}

fn config(generation: u64, checks: Vec<ClusterCheck>) -> AgentConfig {
    AgentConfig {
        generation,
        interval_seconds: 1,
        liveness_checks: checks,
        ..Default::default()
    }
}

fn engine(sim: &KubeSim, stop: &CancellationToken) -> CheckEngine {
    let options = EngineOptions {
        cache: CacheOptions {
            sync_wait: Duration::from_millis(200),
            ..CacheOptions::default()
        },
        ..EngineOptions::default()
    };
    CheckEngine::spawn(
        Reader::Kube(KubeReader::new(sim.client())),
        options,
        stop.clone(),
    )
}

async fn create_pod(sim: &KubeSim, name: &str) {
    crate::checks::resources::cache::tests::create_pod(sim, name, "web").await;
}

fn requests(sim: &KubeSim, verb: &str, resource: &str, mark: usize) -> usize {
    (sim.requests()[mark..].iter())
        .filter(|r| r.verb == verb && r.resource == resource)
        .count()
}

fn shows(results: &[CheckResult], name: &str, message: &str) -> bool {
    results
        .iter()
        .any(|r| r.name == name && r.passing && r.message == message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_added_by_a_config_is_watched_and_its_watch_stops_when_a_config_drops_it() {
    let sim = KubeSim::new();
    create_pod(&sim, "p0").await;
    create_pod(&sim, "p1").await;
    let stop = CancellationToken::new();
    let engine = engine(&sim, &stop);
    let mark = sim.requests().len();
    engine.apply_config(&config(1, vec![counting("pods", "Pod")]));
    results_when(&engine, "the pods check to count 2", |r| {
        shows(r, "pods", "2 Pod")
    })
    .await;
    let watching = eventually(DEADLINE, || async {
        (sim.open_watches() == 1).then_some(())
    });
    assert!(watching.await.is_some(), "one watch of pods");
    // A new pod reaches the check through the watch, not a list.
    let lists = requests(&sim, "list", "pods", mark);
    create_pod(&sim, "p2").await;
    results_when(&engine, "the pods check to count 3", |r| {
        shows(r, "pods", "3 Pod")
    })
    .await;
    assert_eq!(requests(&sim, "list", "pods", mark), lists);

    engine.apply_config(&config(2, vec![counting("nodes", "Node")]));
    results_when(&engine, "the nodes check to count 3", |r| {
        shows(r, "nodes", "3 Node")
    })
    .await;
    let only_nodes = eventually(DEADLINE, || async {
        (requests(&sim, "watch", "nodes", mark) == 1 && sim.open_watches() == 1).then_some(())
    });
    assert!(
        only_nodes.await.is_some(),
        "the pods watch ended, the nodes watch is open"
    );
    let pods_mark = sim.requests().len();

    engine.apply_config(&config(3, Vec::new()));
    let none = eventually(DEADLINE, || async {
        (sim.open_watches() == 0).then_some(())
    });
    assert!(
        none.await.is_some(),
        "no Lua check selects a kind: no watch is open"
    );
    assert_eq!(
        requests(&sim, "list", "pods", pods_mark) + requests(&sim, "watch", "pods", pods_mark),
        0,
        "nothing reads pods once no check selects them"
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_over_a_kind_whose_cache_has_not_synced_fails_saying_so_then_passes() {
    let sim = KubeSim::new();
    create_pod(&sim, "p0").await;
    sim.refuse("pods", "list", true);
    let stop = CancellationToken::new();
    let engine = engine(&sim, &stop);
    engine.apply_config(&config(1, vec![counting("pods", "Pod")]));
    let results = results_when(&engine, "the pods check to fail as syncing", |r| {
        r.iter()
            .any(|c| c.name == "pods" && !c.passing && c.message.contains("not synced yet"))
    })
    .await;
    let failed = results.iter().find(|c| c.name == "pods").unwrap();
    assert!(
        failed
            .message
            .contains("the agent's cache of v1/Pod in all namespaces has not synced yet"),
        "{}",
        failed.message
    );
    sim.refuse("pods", "list", false);
    results_when(&engine, "the pods check to pass", |r| {
        shows(r, "pods", "1 Pod")
    })
    .await;
    stop.cancel();
}

fn lua_check(name: &str, condition: &str) -> Arc<LuaCheck> {
    Arc::new(LuaCheck {
        name: name.into(),
        script: Script::Condition(condition.into()),
        selectors: vec![ResourceSelector {
            version: "v1".into(),
            kind: "Pod".into(),
            ..Default::default()
        }],
        deadline: None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_that_changes_cached_objects_changes_them_for_no_other_check_or_round() {
    let sim = KubeSim::new();
    create_pod(&sim, "p0").await;
    let stop = CancellationToken::new();
    let reader = CachedReader::new(
        KubeReader::new(sim.client()),
        CacheOptions::default(),
        stop.clone(),
    );
    let change = lua_check(
        "change",
        r#"function evaluate()
             resources[1].metadata.name = "changed"
             resources[1].metadata.labels.app = "changed"
             resources[1].spec.containers[1].image = "changed"
             table.remove(resources, 1)
             return { pass = true, message = "changed" }
           end"#,
    );
    let report = lua_check(
        "report",
        r#"function evaluate()
             local p = resources[1]
             return { pass = true, message = #resources .. " " .. p.metadata.name .. " "
               .. p.metadata.labels.app .. " " .. p.spec.containers[1].image }
           end"#,
    );
    let cluster = ObjectMeta::default();
    reader.watch_for(vec![change.clone(), report.clone()], &[], &cluster);
    let limits = LuaLimits::default();
    // Rounds on one kept state, as the engine runs them: the Pod is the same text in every
    // round, so the tables the first round converted are the ones the next rounds read.
    let round = |checks: Vec<Arc<LuaCheck>>, state| {
        let (reader, cluster) = (&reader, &cluster);
        async move {
            let batch = Batch::plan(checks, cluster);
            let ran = run_each(reader, batch, limits, state, |_, _| {}).await;
            let messages: Vec<String> = ran.runs.into_iter().map(|r| r.outcome.message).collect();
            (messages, ran.state)
        }
    };
    let (first, state) = round(vec![change.clone(), report.clone()], None).await;
    assert_eq!(first, ["changed", "1 p0 web nginx"], "same round");
    let (next, state) = round(vec![report.clone(), change.clone()], state).await;
    assert_eq!(
        next,
        ["1 p0 web nginx", "changed"],
        "next round, on the kept state"
    );
    assert_eq!(state.as_ref().map(|s| s.held_objects()), Some(1));
    let (again, _) = round(vec![report.clone()], state).await;
    assert_eq!(again, ["1 p0 web nginx"], "the round after");
    // A fresh state reads the cache the same.
    let fresh = run_batch(&reader, &cluster, vec![report], limits).await;
    assert_eq!(fresh[0].message, "1 p0 web nginx");
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_nodes_and_ready_pods_read_the_watch_fed_caches_not_a_list_every_run() {
    let sim = KubeSim::new();
    create_pod(&sim, "p0").await;
    let stop = CancellationToken::new();
    let engine = engine(&sim, &stop);
    let mark = sim.requests().len();
    let nodes = ClusterCheck {
        name: "nodes".into(),
        ready_nodes: Some(ReadyNodesCheck {
            min_count: Some(3),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pods = ClusterCheck {
        name: "pods".into(),
        ready_pods: Some(ReadyPodsCheck {
            namespace: "default".into(),
            min_count: Some(0),
            ..Default::default()
        }),
        ..Default::default()
    };
    engine.apply_config(&config(1, vec![nodes, pods]));
    results_when(&engine, "both built-ins to pass", |r| {
        shows(r, "nodes", "3 of 3 nodes Ready (need at least 3)")
            && shows(
                r,
                "pods",
                "0 of 1 pods in namespace default Ready (need at least 0)",
            )
    })
    .await;
    let lists = requests(&sim, "list", "nodes", mark) + requests(&sim, "list", "pods", mark);
    assert_eq!(lists, 2, "each kind listed once, when its watch starts");
    // A node going NotReady reaches the check through the watch, and no run lists again.
    assert!(sim.set_node_ready("node-2", false));
    results_when(&engine, "the nodes check to fail", |r| {
        r.iter()
            .any(|c| c.name == "nodes" && !c.passing && c.message.starts_with("2 of 3 nodes Ready"))
    })
    .await;
    let later = requests(&sim, "list", "nodes", mark) + requests(&sim, "list", "pods", mark);
    assert_eq!(later, lists, "runs read the caches");
    assert_eq!(requests(&sim, "watch", "nodes", mark), 1);
    stop.cancel();
}

use std::time::Duration;

use serde_json::json;

use fleetpulse_common::api::{ClusterCheck, ReadyNodesCheck, ResourceSelector};

use super::*;
use crate::checks::builtin::APISERVER_CHECK;
use crate::checks::resources::StaticReader;

fn nodes(ready: usize, total: usize) -> Vec<serde_json::Value> {
    (0..total)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("n{i}")},
                   "status": {"conditions": [{"type": "Ready", "status": if i < ready { "True" } else { "False" }}]}})
        })
        .collect()
}

fn lua(name: &str, script: &str) -> ClusterCheck {
    ClusterCheck {
        name: name.into(),
        resource_selectors: vec![ResourceSelector {
            version: "v1".into(),
            kind: "Node".into(),
            ..Default::default()
        }],
        condition: Some(script.into()),
        ..Default::default()
    }
}

const ALL_NODES_READY: &str = r#"
function evaluate()
  local hs = { pass = true, message = "all nodes ready" }
  for _, node in ipairs(resources) do
    for _, c in ipairs(node.status.conditions) do
      if c.type == "Ready" and c.status ~= "True" then
        hs.pass = false
        hs.message = node.metadata.name .. " is not ready"
      end
    end
  end
  return hs
end
"#;

/// Polls `engine` until `done` holds for its results (at most 20 s), and returns them.
pub(super) async fn results_when(
    engine: &CheckEngine,
    what: &str,
    mut done: impl FnMut(&[CheckResult]) -> bool,
) -> Vec<CheckResult> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let results = engine.results();
        if done(&results) {
            return results;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: {results:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn find<'a>(results: &'a [CheckResult], name: &str) -> &'a CheckResult {
    results
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no result for {name}: {results:#?}"))
}

fn config(readiness: Vec<ClusterCheck>, liveness: Vec<ClusterCheck>) -> AgentConfig {
    AgentConfig {
        generation: 1,
        interval_seconds: 1,
        readiness_checks: readiness,
        liveness_checks: liveness,
        ..Default::default()
    }
}

#[tokio::test]
async fn a_round_runs_lua_builtins_and_readyz_and_a_hostile_script_fails_alone() {
    let token = CancellationToken::new();
    let engine = CheckEngine::spawn(
        Reader::Static(StaticReader::new(nodes(3, 3))),
        EngineOptions::default(),
        token.clone(),
    );
    engine.apply_config(&config(
        vec![
            lua("nodes-ready", ALL_NODES_READY),
            ClusterCheck {
                name: "three-nodes".into(),
                ready_nodes: Some(ReadyNodesCheck {
                    min_count: Some(3),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ],
        vec![lua("spin", "function evaluate() while true do end end")],
    ));
    let results = results_when(&engine, "every check to have run", |r| {
        r.len() == 4 && r.iter().all(|c| c.message != "not run yet")
    })
    .await;
    assert!(find(&results, APISERVER_CHECK).passing);
    assert!(
        find(&results, "nodes-ready").passing,
        "{:?}",
        find(&results, "nodes-ready")
    );
    assert!(find(&results, "three-nodes").passing);
    let spin = find(&results, "spin");
    assert!(!spin.passing);
    assert!(spin.message.contains("deadline"), "{}", spin.message);
    token.cancel();
}

#[tokio::test]
async fn an_unchanged_check_keeps_its_verdict_across_a_new_config() {
    let token = CancellationToken::new();
    let engine = CheckEngine::spawn(
        Reader::Static(StaticReader::new(nodes(1, 2))),
        EngineOptions::default(),
        token.clone(),
    );
    engine.apply_config(&config(vec![lua("nodes-ready", ALL_NODES_READY)], vec![]));
    let before = results_when(&engine, "the check to fail", |r| {
        r.iter()
            .any(|c| c.name == "nodes-ready" && c.message != "not run yet")
    })
    .await;
    let since = find(&before, "nodes-ready").since.clone();
    assert!(!find(&before, "nodes-ready").passing);
    engine.apply_config(&config(
        vec![lua("nodes-ready", ALL_NODES_READY)],
        vec![lua("extra", "function evaluate() return {pass = true} end")],
    ));
    let after = results_when(&engine, "the new check to run", |r| {
        r.iter()
            .any(|c| c.name == "extra" && c.message != "not run yet")
    })
    .await;
    assert_eq!(find(&after, "nodes-ready").since, since, "verdict kept");
    assert!(find(&after, "extra").passing);
    token.cancel();
}

#[tokio::test]
async fn without_a_kubernetes_api_there_is_no_readyz_and_resource_checks_say_why() {
    let token = CancellationToken::new();
    let engine = CheckEngine::spawn(Reader::None, EngineOptions::default(), token.clone());
    assert!(!engine.has_api());
    engine.apply_config(&config(
        vec![],
        vec![ClusterCheck {
            name: "nodes".into(),
            ready_nodes: Some(ReadyNodesCheck::default()),
            ..Default::default()
        }],
    ));
    let results = results_when(&engine, "the check to run", |r| {
        r.iter().any(|c| c.message != "not run yet")
    })
    .await;
    assert_eq!(results.len(), 1, "no apiserver-readyz without an API");
    assert!(
        results[0].message.contains("--kubeconfig"),
        "{}",
        results[0].message
    );
    token.cancel();
}

/// A Lua check that spins until its own, long deadline.
fn spinning(timeout_seconds: u32) -> ClusterCheck {
    ClusterCheck {
        timeout_seconds: Some(timeout_seconds),
        ..lua("spin", "function evaluate() while true do end end")
    }
}

fn ready_nodes_builtin() -> ClusterCheck {
    ClusterCheck {
        name: "all-nodes".into(),
        ready_nodes: Some(ReadyNodesCheck {
            min_percent: Some(100),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_ready_node_is_reported_within_an_interval_while_another_check_spins() {
    let token = CancellationToken::new();
    let reader = StaticReader::new(nodes(3, 3));
    let engine = CheckEngine::spawn(
        Reader::Static(reader.clone()),
        EngineOptions::default(),
        token.clone(),
    );
    // Interval 1 s; the spinning check may take 12 s before its deadline fails it (the
    // test's runtime waits for it to end).
    engine.apply_config(&config(
        vec![],
        vec![
            lua("nodes-ready", ALL_NODES_READY),
            ready_nodes_builtin(),
            spinning(12),
        ],
    ));
    results_when(&engine, "both node checks to pass", |r| {
        ["nodes-ready", "all-nodes"].iter().all(|n| {
            r.iter()
                .any(|c| c.name == *n && c.passing && c.since.is_some())
        })
    })
    .await;
    reader.replace(nodes(2, 3));
    let noticed = std::time::Instant::now();
    let results = results_when(&engine, "both node checks to fail", |r| {
        ["nodes-ready", "all-nodes"]
            .iter()
            .all(|n| r.iter().any(|c| c.name == *n && !c.passing))
    })
    .await;
    assert!(
        noticed.elapsed() < Duration::from_secs(6),
        "took {:?}",
        noticed.elapsed()
    );
    assert_eq!(find(&results, "nodes-ready").message, "n2 is not ready");
    let spin = find(&results, "spin");
    assert!(
        spin.passing,
        "a liveness check passes until its first run ends"
    );
    assert!(
        spin.message
            .starts_with("not run yet (late: the run in progress"),
        "{}",
        spin.message
    );
    token.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_past_the_shared_deadline_runs_alone_to_its_own_timeout() {
    let token = CancellationToken::new();
    let options = EngineOptions {
        lua_limits: LuaLimits {
            deadline: Duration::from_millis(50),
            ..LuaLimits::default()
        },
        ..EngineOptions::default()
    };
    let engine = CheckEngine::spawn(
        Reader::Static(StaticReader::new(nodes(3, 3))),
        options,
        token.clone(),
    );
    // Needs one to two seconds: more than a shared round's 50 ms, well within its own 30 s.
    let slow = ClusterCheck {
        timeout_seconds: Some(30),
        ..lua(
            "slow",
            // One to two seconds by the wall clock (`os.time` counts whole seconds).
            r#"function evaluate()
                 local start = os.time()
                 while os.time() < start + 2 do end
                 return { pass = true, message = "done" }
               end"#,
        )
    };
    engine.apply_config(&config(
        vec![slow, lua("nodes-ready", ALL_NODES_READY)],
        vec![],
    ));
    let results = results_when(&engine, "the slow check to pass", |r| {
        r.iter().any(|c| c.name == "slow" && c.passing)
    })
    .await;
    assert_eq!(find(&results, "slow").message, "done");
    assert!(find(&results, "nodes-ready").passing);
    token.cancel();
}

/// A check the agent cannot parse (here a health script with no selectors, which would
/// otherwise pass over no objects) fails, saying why, and the others still run.
#[tokio::test]
async fn a_check_that_does_not_parse_fails_saying_why_and_never_passes_by_being_skipped() {
    let token = CancellationToken::new();
    let engine = CheckEngine::spawn(
        Reader::Static(StaticReader::new(nodes(3, 3))),
        EngineOptions::default(),
        token.clone(),
    );
    let unreadable = ClusterCheck {
        name: "certs".into(),
        health_script: Some("hs = { status = 'Healthy' } return hs".into()),
        ..Default::default()
    };
    engine.apply_config(&config(
        vec![],
        vec![unreadable, lua("nodes-ready", ALL_NODES_READY)],
    ));
    let results = results_when(&engine, "the readable check to have run", |r| {
        r.iter()
            .any(|c| c.name == "nodes-ready" && c.message != "not run yet")
    })
    .await;
    assert!(find(&results, "nodes-ready").passing);
    let certs = find(&results, "certs");
    assert!(!certs.passing, "{certs:?}");
    assert!(
        certs
            .message
            .starts_with("not run: the check cannot be read")
            && certs
                .message
                .contains("livenessChecks[0].resourceSelectors"),
        "{}",
        certs.message
    );
    token.cancel();
}

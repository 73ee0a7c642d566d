use serde_json::json;

use super::*;
use crate::api::{CheckPhase, ClusterCheck};
use crate::checks::model::Check;

/// Runs until its deadline stops it (`os.clock` is process CPU time in Lua 5.4, which other
/// threads advance too, so no test may time itself with it).
const ENDLESS: &str = "function evaluate() while true do end end";

fn check(name: &str, timeout_seconds: Option<u32>) -> ClusterCheck {
    ClusterCheck {
        name: name.into(),
        condition: Some(ENDLESS.into()),
        timeout_seconds,
        ..Default::default()
    }
}

/// The Lua part of `spec`, parsed as the engines parse it.
fn lua_of(spec: &ClusterCheck) -> Arc<LuaCheck> {
    let check = Check::parse(spec, CheckPhase::Liveness, "spec.livenessChecks[0]").unwrap();
    check.lua().cloned().expect("a Lua check")
}

#[test]
fn timeout_seconds_gives_a_lua_check_its_own_deadline() {
    let checks = vec![
        lua_of(&check("default", None)),
        lua_of(&check("patient", Some(2))),
    ];
    let batch = Batch::plan(checks, &ObjectMeta::default());
    let verdicts = batch.evaluate(Vec::new(), LuaLimits::default());
    assert!(!verdicts[0].passing && !verdicts[1].passing);
    assert!(
        verdicts[0].message.contains("250 ms deadline"),
        "{:?}",
        verdicts[0]
    );
    assert!(
        verdicts[1].message.contains("2 s deadline"),
        "its own timeoutSeconds: {:?}",
        verdicts[1]
    );
}

#[test]
fn each_query_is_listed_once_and_ctx_holds_the_named_object() {
    let selector = |identifier: &str, name: Option<&str>| ResourceSelector {
        version: "v1".into(),
        kind: "ConfigMap".into(),
        name: name.map(Into::into),
        identifier: Some(identifier.into()),
        ..Default::default()
    };
    let one = LuaCheck {
        name: "one".into(),
        script: Script::Condition("function evaluate() return {pass = ctx.cm.metadata.name == 'a' and #resources == 1} end".into()),
        selectors: vec![selector("cm", Some("a"))],
        deadline: None,
    };
    let all = LuaCheck {
        name: "all".into(),
        script: Script::Condition(
            "function evaluate() return {pass = #ctx.cms == 2, message = tostring(#ctx.cms)} end"
                .into(),
        ),
        selectors: vec![selector("cms", None)],
        deadline: None,
    };
    let batch = Batch::plan(
        vec![Arc::new(one), Arc::new(all.clone()), Arc::new(all)],
        &ObjectMeta::default(),
    );
    assert_eq!(
        batch.queries().len(),
        2,
        "identical selectors are listed once"
    );
    let cm = |n: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}});
    let listed: Vec<Result<Vec<serde_json::Value>, String>> = batch
        .queries()
        .iter()
        .map(|q| {
            Ok([cm("a"), cm("b")]
                .into_iter()
                .filter(|o| q.matches(o))
                .collect())
        })
        .collect();
    let verdicts = batch.evaluate(listed, LuaLimits::default());
    assert!(verdicts.iter().all(|v| v.passing), "{verdicts:?}");
}

/// Plans `check` for no particular cluster, lists `objects` for each query as a reader
/// would (API-server filters only), and evaluates it.
fn evaluate_one(check: ClusterCheck, objects: &[serde_json::Value]) -> RunOutcome {
    let batch = Batch::plan(vec![lua_of(&check)], &ObjectMeta::default());
    let listed = batch
        .queries()
        .iter()
        .map(|q| Ok(objects.iter().filter(|o| q.matches(o)).cloned().collect()))
        .collect();
    batch.evaluate(listed, LuaLimits::default()).remove(0)
}

fn pod(name: &str, app: &str, phase: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "web", "labels": {"app": app},
                        "managedFields": [{"manager": "kubectl"}]},
           "status": {"phase": phase}})
}

fn check_with(selectors: serde_json::Value, condition: &str) -> ClusterCheck {
    serde_json::from_value(json!({
        "name": "pods", "condition": condition, "resourceSelectors": selectors
    }))
    .unwrap()
}

const NAMES: &str = r#"function evaluate()
  local names = {}
  for _, r in ipairs(resources) do names[#names + 1] = r.metadata.name end
  return { pass = true, message = table.concat(names, ",") }
end"#;

#[test]
fn overlapping_selectors_list_an_object_once_per_selector_as_sveltos_does() {
    let check = check_with(
        json!([{"version": "v1", "kind": "Pod", "selector": "app=web"},
               {"version": "v1", "kind": "Pod", "namespace": "web"}]),
        NAMES,
    );
    let outcome = evaluate_one(
        check,
        &[pod("a", "web", "Running"), pod("b", "db", "Running")],
    );
    assert_eq!(outcome.message, "a,a,b");
}

#[test]
fn both_selector_forms_select_the_same_objects() {
    let objects = [
        pod("a", "web", "Running"),
        pod("b", "db", "Running"),
        pod("c", "web", "Failed"),
    ];
    let text = check_with(
        json!([{"version": "v1", "kind": "Pod", "selector": "app in (web)"}]),
        NAMES,
    );
    let structured = check_with(
        json!([{"version": "v1", "kind": "Pod", "selector": {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "app", "operator": "Exists"}]}}]),
        NAMES,
    );
    assert_eq!(evaluate_one(text, &objects).message, "a,c");
    assert_eq!(evaluate_one(structured, &objects).message, "a,c");
}

#[test]
fn evaluate_and_evaluate_cel_filters_turn_a_false_pass_into_a_failure() {
    // "every selected pod is Running": the filters narrow the selection to web pods; without
    // them the check would fail on the db pod, with them it must fail on the web one.
    let condition = r#"function evaluate()
      for _, p in ipairs(resources) do
        if p.status.phase ~= "Running" then return { pass = false, message = p.metadata.name } end
      end
      return { pass = true, message = tostring(#resources) }
    end"#;
    let objects = [
        pod("a", "web", "Running"),
        pod("b", "db", "Pending"),
        pod("c", "web", "Failed"),
    ];
    let lua = check_with(
        json!([{"version": "v1", "kind": "Pod",
                "evaluate": "function evaluate() return { matching = obj.metadata.labels.app == 'web' } end"}]),
        condition,
    );
    assert_eq!(evaluate_one(lua, &objects), RunOutcome::fail("c"));
    let cel = check_with(
        json!([{"version": "v1", "kind": "Pod",
                "evaluateCEL": [{"name": "web", "rule": "resource.metadata.labels.app == 'web'"}]}]),
        condition,
    );
    assert_eq!(evaluate_one(cel, &objects), RunOutcome::fail("c"));
    let only_running = check_with(
        json!([{"version": "v1", "kind": "Pod",
                "evaluateCEL": [{"name": "running", "rule": "resource.status.phase == 'Running'"}]}]),
        condition,
    );
    assert_eq!(evaluate_one(only_running, &objects), RunOutcome::pass("1"));
}

#[test]
fn a_filter_that_fails_fails_its_check_with_the_selector_named() {
    let check = check_with(
        json!([{"version": "v1", "kind": "Pod", "evaluate": "function evaluate() error('boom') end"}]),
        NAMES,
    );
    let outcome = evaluate_one(check, &[pod("a", "web", "Running")]);
    assert!(!outcome.passing);
    assert!(
        outcome.message.contains("boom")
            && outcome
                .message
                .contains("`evaluate` filter of the Pod selector"),
        "{outcome:?}"
    );
}

#[test]
fn scripts_never_see_managed_fields() {
    let check = check_with(
        json!([{"version": "v1", "kind": "Pod"}]),
        "function evaluate() return { pass = resources[1].metadata.managedFields == nil } end",
    );
    assert!(evaluate_one(check, &[pod("a", "web", "Running")]).passing);
}

#[test]
fn a_health_script_check_names_the_first_object_that_is_not_healthy() {
    let check: ClusterCheck = serde_json::from_value(json!({
        "name": "pods-healthy",
        "healthScript": "hs = {} if obj.status.phase == 'Running' then hs.status = 'Healthy' else hs.status = 'Degraded' hs.message = obj.status.phase end return hs",
        "resourceSelectors": [{"version": "v1", "kind": "Pod"}]
    }))
    .unwrap();
    let outcome = evaluate_one(
        check.clone(),
        &[pod("a", "web", "Running"), pod("b", "web", "Failed")],
    );
    assert_eq!(outcome, RunOutcome::fail("Pod web/b is Degraded: Failed"));
    assert_eq!(
        evaluate_one(check, &[pod("a", "web", "Running")]),
        RunOutcome::pass("Pod web/a is Healthy")
    );
}

/// A check reading `field` of every object of `kind`.
fn reading(name: &str, kind: &str, script: &str) -> Arc<LuaCheck> {
    Arc::new(LuaCheck {
        name: name.into(),
        script: Script::Condition(script.into()),
        selectors: vec![ResourceSelector {
            group: "example.io".into(),
            version: "v1".into(),
            kind: kind.into(),
            ..Default::default()
        }],
        deadline: None,
    })
}

#[test]
fn an_object_nested_too_deeply_fails_only_the_checks_that_read_that_deep() {
    let mut spec = json!({ "value": "bottom" });
    for _ in 0..80 {
        spec = json!({ "next": spec });
    }
    let deep = json!({ "apiVersion": "example.io/v1", "kind": "Deep",
                       "metadata": { "name": "abyss" }, "spec": spec });
    let other = json!({ "apiVersion": "example.io/v1", "kind": "Other",
                        "metadata": { "name": "fine" } });
    let name =
        "function evaluate() return { pass = true, message = resources[1].metadata.name } end";
    let walk = r#"function evaluate()
      local t = resources[1].spec
      while t.next do t = t.next end
      return { pass = true }
    end"#;
    let batch = Batch::plan(
        vec![
            reading("other-kind", "Other", name),
            reading("top-of-deep", "Deep", name),
            reading("walks-deep", "Deep", walk),
        ],
        &ObjectMeta::default(),
    );
    let listed = batch
        .queries()
        .iter()
        .map(|q| {
            Ok(if q.kind == "Deep" {
                vec![deep.clone()]
            } else {
                vec![other.clone()]
            })
        })
        .collect();
    let mut seen = Vec::new();
    let runs = batch.evaluate_each(listed, LuaLimits::default(), |i, run| {
        seen.push((i, run.outcome.passing))
    });
    assert_eq!(seen, vec![(0, true), (1, true), (2, false)], "{runs:?}");
    assert_eq!(runs[0].outcome.message, "fine");
    assert_eq!(runs[1].outcome.message, "abyss");
    assert!(
        runs[2]
            .outcome
            .message
            .contains("Deep abyss is nested deeper than 64 levels"),
        "{:?}",
        runs[2]
    );
    assert!(!runs[2].deadline_exceeded);
}

#[test]
fn a_run_past_its_deadline_is_marked_so() {
    let checks = vec![
        lua_of(&check("spins", None)),
        Arc::new(LuaCheck {
            script: Script::Condition("function evaluate() return { pass = true } end".into()),
            ..(*lua_of(&check("quick", None))).clone()
        }),
    ];
    let batch = Batch::plan(checks, &ObjectMeta::default());
    let runs = batch.evaluate_each(Vec::new(), LuaLimits::default(), |_, _| {});
    assert!(runs[0].deadline_exceeded && !runs[0].outcome.passing);
    assert!(
        runs[0].took >= LuaLimits::default().deadline,
        "{:?}",
        runs[0]
    );
    assert!(!runs[1].deadline_exceeded && runs[1].outcome.passing);
}

//! Behaviour of [`LuaRound`] with well-behaved scripts: Sveltos scripts and scripts returning `healthy`
//! unchanged, result validation, fresh globals per check, objects shared by a round.

use serde_json::{Value, json};

use super::*;

/// A script that passes, for "the round still works" assertions.
pub(super) const PASSING: &str =
    r#"function evaluate() return { pass = true, message = "still works" } end"#;

/// A round with default limits.
pub(super) fn round() -> LuaRound {
    LuaRound::new(LuaLimits::default()).expect("Lua state")
}

/// Asserts that a passing check still passes on `round`.
pub(super) fn assert_round_still_works(round: &LuaRound) {
    let outcome = round
        .evaluate("after", PASSING, &[], &[])
        .expect("normal check after a failed one");
    assert!(outcome.passing);
    assert_eq!(outcome.message, "still works");
}

/// A Node; `control_plane` adds the control-plane role label.
pub(super) fn node(name: &str, ready: bool, control_plane: bool) -> Value {
    let mut labels = json!({ "kubernetes.io/hostname": name });
    if control_plane {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": labels, "deletionTimestamp": null },
        "status": {
            "conditions": [
                { "type": "MemoryPressure", "status": "False" },
                { "type": "Ready", "status": if ready { "True" } else { "False" }, "reason": "KubeletReady" }
            ],
            "capacity": { "cpu": "4", "pods": "110" }
        }
    })
}

fn add_all(round: &mut LuaRound, objects: &[Value]) -> Vec<ObjectId> {
    objects
        .iter()
        .map(|o| round.add_object(o.clone()).expect("object converts"))
        .collect()
}

// Copied unchanged from Sveltos' docs, "SveltosCluster Readiness Checks":
// https://projectsveltos.github.io/sveltos/register/readiness_liveness_checks/
// (source: projectsveltos/sveltos, docs/register/readiness_liveness_checks.md).
// Passes when at least one node lacks the control-plane role label.
const SVELTOS_WORKER_NODE_CHECK: &str = r#"function evaluate()
  hs = {}
  hs.pass = false

  for _, resource in ipairs(resources) do
    if  not (resource.metadata.labels and resource.metadata.labels["node-role.kubernetes.io/control-plane"]) then
      hs.pass = true
    end
  end

  return hs
end"#;

#[test]
fn sveltos_worker_node_readiness_check_passes_with_a_worker_and_fails_without() {
    let mut r = round();
    let with_worker = add_all(
        &mut r,
        &[node("cp-1", true, true), node("worker-1", true, false)],
    );
    let only_control_plane = add_all(
        &mut r,
        &[node("cp-2", true, true), node("cp-3", true, true)],
    );

    let outcome = r
        .evaluate(
            "worker-node-check",
            SVELTOS_WORKER_NODE_CHECK,
            &with_worker,
            &[],
        )
        .unwrap();
    assert!(outcome.passing);
    let outcome = r
        .evaluate(
            "worker-node-check",
            SVELTOS_WORKER_NODE_CHECK,
            &only_control_plane,
            &[],
        )
        .unwrap();
    assert!(!outcome.passing);
    assert_eq!(outcome.message, "");
}

// A KeptnMetric-style check that returns `healthy` instead of `pass`.
const KEPTN_METRIC_CHECK: &str = r#"function evaluate() local hs = {healthy = false, message = "" } local v = tonumber(ctx.metric.status.value) if v ~= nil and v < 0.05 then hs.healthy = true end hs.message = "error rate " .. tostring(v) return hs end"#;

fn keptn_metric(value: &str) -> Value {
    json!({
        "apiVersion": "metrics.keptn.sh/v1",
        "kind": "KeptnMetric",
        "metadata": { "name": "cluster-a-error-rate", "namespace": "fleet" },
        "spec": { "provider": { "name": "prometheus" }, "query": "sum(rate(errors[5m]))", "fetchIntervalSeconds": 10 },
        "status": { "value": value, "rawValue": "MC4wMQ==" }
    })
}

#[test]
fn keptn_metric_script_reads_ctx_object_and_judges_the_error_rate() {
    let mut r = round();
    let low = r.add_object(keptn_metric("0.01")).unwrap();
    let high = r.add_object(keptn_metric("0.2")).unwrap();

    let ctx = [("metric".to_string(), CtxValue::One(low))];
    let outcome = r
        .evaluate("error-rate", KEPTN_METRIC_CHECK, &[low], &ctx)
        .unwrap();
    assert_eq!(
        outcome,
        LuaOutcome {
            passing: true,
            message: "error rate 0.01".into()
        }
    );

    let ctx = [("metric".to_string(), CtxValue::One(high))];
    let outcome = r
        .evaluate("error-rate", KEPTN_METRIC_CHECK, &[high], &ctx)
        .unwrap();
    assert_eq!(
        outcome,
        LuaOutcome {
            passing: false,
            message: "error rate 0.2".into()
        }
    );
}

#[test]
fn ctx_many_is_an_array_and_resources_is_also_the_first_argument() {
    let mut r = round();
    let ids = add_all(&mut r, &[node("a", true, false), node("b", false, false)]);
    let script = r#"function evaluate(objects)
        local names = {}
        for i, n in ipairs(ctx.nodes) do names[i] = n.metadata.name end
        return { pass = #objects == 2 and objects[2] == resources[2], message = table.concat(names, ",") }
    end"#;
    let ctx = [("nodes".to_string(), CtxValue::Many(ids.clone()))];
    let outcome = r.evaluate("many", script, &ids, &ctx).unwrap();
    assert_eq!(
        outcome,
        LuaOutcome {
            passing: true,
            message: "a,b".into()
        }
    );
}

#[test]
fn json_values_convert_faithfully_and_null_reads_as_nil() {
    let mut r = round();
    let id = r
        .add_object(json!({
            "kind": "Thing",
            "spec": { "replicas": 3, "ratio": 0.25, "big": 9007199254740993u64, "enabled": true,
                      "matrix": [[1, 2], [3, 4]], "gone": null, "list": ["x", null, "z"], "empty": {} }
        }))
        .unwrap();
    let script = r#"function evaluate()
        local s = resources[1].spec
        assert(type(s.replicas) == "number" and s.replicas == 3 and s.replicas + 0.5 == 3.5)
        assert(s.ratio == 0.25 and s.enabled == true and type(s.big) == "number")
        assert(#s.matrix == 2 and s.matrix[2][1] == 3 and s.matrix[1][2] == 2)
        assert(s.gone == nil and s.list[1] == "x" and s.list[2] == nil and s.list[3] == "z")
        assert(next(s.empty) == nil and s.missing == nil)
        return { pass = true }
    end"#;
    assert!(r.evaluate("json", script, &[id], &[]).unwrap().passing);
}

#[test]
fn globals_do_not_leak_between_evaluations() {
    let r = round();
    let setter = "leak = 1 function evaluate() hs = { pass = true } return hs end";
    assert!(r.evaluate("setter", setter, &[], &[]).unwrap().passing);
    let reader = r#"function evaluate() return { pass = leak == nil and hs == nil, message = tostring(leak) } end"#;
    let outcome = r.evaluate("reader", reader, &[], &[]).unwrap();
    assert_eq!(
        outcome,
        LuaOutcome {
            passing: true,
            message: "nil".into()
        }
    );
}

#[test]
fn objects_are_converted_once_and_the_same_tables_are_shared_by_every_check() {
    let mut r = round();
    let ids: Vec<_> = (0..2000)
        .map(|i| {
            r.add_object(node(&format!("n{i}"), i % 3 != 0, false))
                .unwrap()
        })
        .collect();
    let script = r#"function evaluate()
        local ready = 0
        for _, n in ipairs(resources) do
            for _, c in ipairs(n.status.conditions) do
                if c.type == "Ready" and c.status == "True" then ready = ready + 1 end
            end
        end
        return { pass = ready >= 1000, message = tostring(resources[1]) .. " " .. tostring(resources[2000]) }
    end"#;
    let mut identities = Vec::new();
    for i in 0..10 {
        let outcome = r.evaluate(&format!("c{i}"), script, &ids, &[]).unwrap();
        assert!(outcome.passing);
        identities.push(outcome.message);
    }
    // Still 2,000 converted objects, and every check saw the very same Lua tables.
    assert_eq!(r.object_count(), 2000);
    assert!(
        identities.windows(2).all(|w| w[0] == w[1]),
        "{identities:?}"
    );
}

#[test]
fn a_large_round_keeps_objects_in_order_for_resources_and_ctx() {
    let mut r = round();
    let ids: Vec<_> = (0..10_000)
        .map(|i| {
            r.add_object(json!({ "kind": "ConfigMap", "metadata": { "name": format!("cm-{i}") } }))
                .unwrap()
        })
        .collect();
    let script = r#"function evaluate() return { pass = #resources == 10000, message = resources[10000].metadata.name } end"#;
    let ctx = [
        ("last".to_string(), CtxValue::One(ids[9999])),
        ("all".to_string(), CtxValue::Many(ids.clone())),
    ];
    let outcome = r.evaluate("many-objects", script, &ids, &ctx).unwrap();
    assert_eq!(
        outcome,
        LuaOutcome {
            passing: true,
            message: "cm-9999".into()
        }
    );
}

#[test]
fn an_object_from_another_round_is_refused() {
    let mut a = round();
    let b = round();
    let id = a.add_object(node("n", true, false)).unwrap();
    let err = b.evaluate("foreign", PASSING, &[id], &[]).unwrap_err();
    assert!(matches!(err, LuaError::UnknownObject { .. }), "{err}");
}

#[test]
fn a_round_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<LuaRound>();
}

#[test]
fn a_script_may_shadow_a_builtin_for_itself_only() {
    let r = round();
    let shadow = r#"function tostring(v) return "shadowed" end
        function evaluate() return { pass = true, message = tostring(1) } end"#;
    assert_eq!(
        r.evaluate("shadow", shadow, &[], &[]).unwrap().message,
        "shadowed"
    );
    let plain = r#"function evaluate() return { pass = true, message = tostring(1) } end"#;
    assert_eq!(r.evaluate("plain", plain, &[], &[]).unwrap().message, "1");
}

use serde_json::json;

use super::*;

const BUSY_400_MS: &str = "function evaluate() local t = os.clock() while os.clock() - t < 0.4 do end return {pass = true} end";

fn check(name: &str, timeout_seconds: Option<u32>) -> ClusterCheck {
    ClusterCheck {
        name: name.into(),
        condition: Some(BUSY_400_MS.into()),
        timeout_seconds,
        ..Default::default()
    }
}

#[test]
fn timeout_seconds_gives_a_lua_check_its_own_deadline() {
    let checks = vec![
        LuaCheck::of(&check("default", None)).unwrap(),
        LuaCheck::of(&check("patient", Some(2))).unwrap(),
    ];
    let batch = Batch::plan(checks, &ObjectMeta::default());
    let verdicts = batch.evaluate(&[], LuaLimits::default());
    let default = verdicts[0].as_ref().unwrap_err();
    assert!(default.contains("250 ms deadline"), "{default}");
    assert!(verdicts[1].as_ref().unwrap().passing);
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
        condition: "function evaluate() return {pass = ctx.cm.metadata.name == 'a' and #resources == 1} end".into(),
        selectors: vec![selector("cm", Some("a"))],
        deadline: None,
    };
    let all = LuaCheck {
        name: "all".into(),
        condition:
            "function evaluate() return {pass = #ctx.cms == 2, message = tostring(#ctx.cms)} end"
                .into(),
        selectors: vec![selector("cms", None)],
        deadline: None,
    };
    let batch = Batch::plan(vec![one, all.clone(), all], &ObjectMeta::default());
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
    let verdicts = batch.evaluate(&listed, LuaLimits::default());
    assert!(
        verdicts.iter().all(|v| v.as_ref().is_ok_and(|o| o.passing)),
        "{verdicts:?}"
    );
}

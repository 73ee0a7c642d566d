use serde_json::{Value, json};

use super::*;
use crate::api::{CelRule, HttpHeader};

const PASS: &str = "function evaluate() return {pass = true} end";

fn parse(spec: Value) -> Result<Check, ValidationError> {
    let spec: ClusterCheck = serde_json::from_value(spec).expect("a ClusterCheck");
    Check::parse(&spec, CheckPhase::Liveness, "spec.livenessChecks[0]")
}

fn field_of(spec: Value) -> String {
    parse(spec).expect_err("refused").field
}

fn pods() -> Value {
    json!([{"version": "v1", "kind": "Pod"}])
}

#[test]
fn a_check_sets_no_timing_field_and_gets_every_default() {
    let check = parse(json!({"name": "nodes", "readyNodes": {"minCount": 1}})).unwrap();
    assert_eq!(check.timing, Timing::default());
    assert_eq!(check.timing.failure_threshold, 1);
    assert_eq!((check.timing.period, check.timing.timeout), (None, None));
    assert_eq!(check.kind.reported(), CheckKind::ReadyNodes);
    assert_eq!(
        (check.phase, check.runs_on),
        (CheckPhase::Liveness, RunsOn::Agent)
    );
}

#[test]
fn timing_fields_are_read_once_with_for_or_its_other_spelling() {
    let check = parse(
        json!({"name": "api", "periodSeconds": 5, "timeoutSeconds": 2,
        "failureThreshold": 3, "successThreshold": 2, "duration": "1m30s",
        "tcp": {"host": "db", "port": 5432}}),
    )
    .unwrap();
    assert_eq!(
        check.timing,
        Timing {
            period: Some(Duration::from_secs(5)),
            timeout: Some(Duration::from_secs(2)),
            failure_threshold: 3,
            success_threshold: 2,
            for_duration: Duration::from_secs(90),
        }
    );
    let for_ = parse(json!({"name": "api", "for": "30s", "tcp": {"host": "db", "port": 1}}));
    assert_eq!(for_.unwrap().timing.for_duration, Duration::from_secs(30));
    let both =
        json!({"name": "api", "for": "30s", "duration": "30s", "tcp": {"host": "db", "port": 1}});
    assert_eq!(field_of(both), "spec.livenessChecks[0]");
    let bad = json!({"name": "api", "for": "soon", "tcp": {"host": "db", "port": 1}});
    assert_eq!(field_of(bad), "spec.livenessChecks[0].for");
}

#[test]
fn each_kind_becomes_its_variant_and_a_lua_check_keeps_its_own_deadline() {
    let lua = parse(
        json!({"name": "pods", "timeoutSeconds": 2, "resourceSelectors": pods(),
        "condition": PASS}),
    )
    .unwrap();
    let Kind::Lua(l) = &lua.kind else {
        panic!("{lua:?}")
    };
    assert_eq!(l.script, Script::Condition(PASS.into()));
    assert_eq!(
        (l.name.as_str(), l.deadline),
        ("pods", Some(Duration::from_secs(2)))
    );
    let health = parse(json!({"name": "certs", "resourceSelectors": pods(),
        "healthScript": "hs = {status = 'Healthy'} return hs"}))
    .unwrap();
    assert!(matches!(&health.lua().unwrap().script, Script::Health(_)));
    let reported = |spec| parse(spec).unwrap().kind.reported();
    let kinds = [
        (
            json!({"name": "p", "pod": {"template": {}}}),
            CheckKind::Pod,
        ),
        (
            json!({"name": "h", "http": {"url": "https://x.test/"}}),
            CheckKind::Http,
        ),
        (
            json!({"name": "t", "tcp": {"host": "x", "port": 1}}),
            CheckKind::Tcp,
        ),
        (
            json!({"name": "r", "readyPods": {"namespace": "x"}}),
            CheckKind::ReadyPods,
        ),
    ];
    for (spec, kind) in kinds {
        assert_eq!(reported(spec), kind);
    }
}

#[test]
fn a_check_reading_the_hub_runs_on_the_hub_and_may_not_read_the_cluster_too() {
    let hub = json!([{"group": "metrics.keptn.sh", "version": "v1", "kind": "KeptnMetric", "fromHub": true}]);
    let check = parse(json!({"name": "slo", "resourceSelectors": hub, "condition": PASS})).unwrap();
    assert_eq!(check.runs_on, RunsOn::Hub);
    let mut both = hub.as_array().unwrap().clone();
    both.push(json!({"version": "v1", "kind": "Pod"}));
    let mixed = json!({"name": "slo", "resourceSelectors": both, "condition": PASS});
    let e = parse(mixed).unwrap_err();
    assert_eq!(e.field, "spec.livenessChecks[0].resourceSelectors");
    assert!(e.problem.contains("split it into two checks"), "{e}");
}

#[test]
fn a_health_script_without_selectors_is_refused() {
    let spec = json!({"name": "certs", "healthScript": "hs = {status = 'Healthy'} return hs"});
    assert_eq!(field_of(spec), "spec.livenessChecks[0].resourceSelectors");
}

#[test]
fn lua_that_does_not_compile_is_refused_naming_the_field_and_the_line() {
    let e = parse(json!({"name": "pods", "condition": "function evaluate() return {pass = } end"}))
        .unwrap_err();
    assert_eq!(e.field, "spec.livenessChecks[0].condition");
    assert!(
        e.problem.contains("check `pods`") && e.problem.contains(":1:"),
        "{e}"
    );
    let admitted: ClusterCheck = serde_json::from_value(
        json!({"name": "pods", "condition": "function evaluate() return {pass = } end"}),
    )
    .unwrap();
    assert!(
        Check::read(&admitted, CheckPhase::Liveness, "x").is_ok(),
        "read leaves compiling to admission"
    );
    let health = json!({"name": "certs", "resourceSelectors": pods(), "healthScript": "hs = "});
    assert_eq!(field_of(health), "spec.livenessChecks[0].healthScript");
    let filter = json!({"name": "pods", "condition": PASS, "resourceSelectors":
        [{"version": "v1", "kind": "Pod", "evaluate": "function evaluate() return"}]});
    assert_eq!(
        field_of(filter),
        "spec.livenessChecks[0].resourceSelectors[0].evaluate"
    );
}

#[test]
fn a_bad_label_selector_or_cel_rule_names_its_field() {
    let mut spec = ClusterCheck {
        name: "pods".into(),
        condition: Some(PASS.into()),
        resource_selectors: vec![
            serde_json::from_value(json!({"version": "v1", "kind": "Pod",
            "selector": {"matchExpressions": [{"key": "app", "operator": "Is", "values": ["x"]}]}}))
            .unwrap(),
        ],
        ..Default::default()
    };
    let parsed =
        |spec: &ClusterCheck| Check::parse(spec, CheckPhase::Readiness, "spec.readinessChecks[1]");
    assert_eq!(
        parsed(&spec).unwrap_err().field,
        "spec.readinessChecks[1].resourceSelectors[0].selector"
    );
    spec.resource_selectors[0].selector = Some("app=web".into());
    spec.resource_selectors[0].evaluate_cel = vec![CelRule {
        name: "broken".into(),
        rule: "resource.status ==".into(),
    }];
    assert_eq!(
        parsed(&spec).unwrap_err().field,
        "spec.readinessChecks[1].resourceSelectors[0].evaluateCEL[0].rule"
    );
    spec.resource_selectors[0].evaluate_cel.clear();
    assert_eq!(parsed(&spec).unwrap().phase, CheckPhase::Readiness);
}

#[test]
fn a_header_needs_exactly_one_of_value_and_value_from() {
    let mut header = HttpHeader::from_secret("Authorization", "probe", "token");
    let mut spec = ClusterCheck {
        name: "api".into(),
        http: Some(HttpProbe {
            url: Some("https://api.test/".into()),
            http_headers: vec![header.clone()],
            ..Default::default()
        }),
        ..Default::default()
    };
    let parsed =
        |spec: &ClusterCheck| Check::parse(spec, CheckPhase::Liveness, "spec.livenessChecks[0]");
    assert!(matches!(parsed(&spec).unwrap().kind, Kind::Http(_)));
    header.value = Some("Bearer x".into());
    spec.http.as_mut().unwrap().http_headers = vec![header.clone()];
    let e = parsed(&spec).unwrap_err();
    assert_eq!(e.field, "spec.livenessChecks[0].http.httpHeaders[0]");
    assert!(
        e.problem.contains("exactly one of value and valueFrom"),
        "{e}"
    );
    header.value_from = None;
    header.value = None;
    spec.http.as_mut().unwrap().http_headers = vec![header];
    assert!(parsed(&spec).is_err());
}

#[test]
fn lists_are_parsed_in_order_with_names_unique_across_both() {
    let check = |name: &str| ClusterCheck {
        name: name.into(),
        condition: Some(PASS.into()),
        ..Default::default()
    };
    let parsed = Check::parse_lists(&[check("a")], &[check("b"), check("c")]).unwrap();
    let seen: Vec<_> = parsed.iter().map(|c| (c.name.as_str(), c.phase)).collect();
    assert_eq!(
        seen,
        [
            ("a", CheckPhase::Readiness),
            ("b", CheckPhase::Liveness),
            ("c", CheckPhase::Liveness)
        ]
    );
    let e = Check::parse_lists(&[check("a")], &[check("a")]).unwrap_err();
    assert_eq!(e.field, "spec.livenessChecks[0].name");
}

/// The CEL rules the CRD gives the API server for a check, read from the generated schema.
fn crd_rules() -> Vec<String> {
    let crd = crate::api::crds::all()
        .into_iter()
        .find(|c| c.spec.names.kind == "MemberCluster")
        .expect("the MemberCluster CRD");
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
    let item = schema
        .pointer("/openAPIV3Schema/properties/spec/properties/livenessChecks/items")
        .expect("the check schema");
    item["x-kubernetes-validations"]
        .as_array()
        .expect("the check's CEL rules")
        .iter()
        .map(|r| r["rule"].as_str().unwrap().to_owned())
        .collect()
}

/// Every combination of kinds, with and without `for` and `duration`: the API server's
/// CEL rules and `Check::parse` accept exactly the same ones.
#[test]
fn the_crds_cel_rules_and_the_parser_agree_on_every_combination_of_kinds() {
    let rules: Vec<cel::Program> = crd_rules()
        .iter()
        .map(|r| cel::Program::compile(r).expect("the CRD's rule parses"))
        .collect();
    assert_eq!(rules.len(), 2, "one kind; for or duration");
    let kinds: [(&str, Value); 7] = [
        ("condition", json!(PASS)),
        ("healthScript", json!("hs = {status = 'Healthy'} return hs")),
        ("pod", json!({"template": {}})),
        ("http", json!({"url": "https://x.test/"})),
        ("tcp", json!({"host": "x", "port": 1})),
        ("readyNodes", json!({"minCount": 1})),
        ("readyPods", json!({"namespace": "x"})),
    ];
    let mut accepted = 0;
    for set in 0u32..(1 << kinds.len()) {
        for timing in 0..4 {
            let mut spec = json!({"name": "c", "resourceSelectors": pods()});
            for (bit, (field, value)) in kinds.iter().enumerate() {
                if set & (1 << bit) != 0 {
                    spec[*field] = value.clone();
                }
            }
            if timing & 1 != 0 {
                spec["for"] = json!("30s");
            }
            if timing & 2 != 0 {
                spec["duration"] = json!("1m");
            }
            let mut context = cel::Context::default();
            context.add_variable("self", &spec).unwrap();
            let by_cel = rules
                .iter()
                .all(|p| matches!(p.execute(&context), Ok(cel::Value::Bool(true))));
            let by_parse = parse(spec.clone());
            assert_eq!(by_cel, by_parse.is_ok(), "{spec}: {by_parse:?}");
            accepted += usize::from(by_cel);
        }
    }
    assert_eq!(
        accepted,
        7 * 3,
        "each kind alone: without `for`, with `for`, with `duration`"
    );
}

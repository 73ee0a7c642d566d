use serde_json::{Value, json};

use super::*;

fn member_cluster(spec: Value) -> Value {
    json!({"apiVersion": "fleetpulse.io/v1alpha1", "kind": "MemberCluster",
           "metadata": {"name": "edge-1", "namespace": "fleet", "labels": {"env": "prod"}},
           "spec": spec})
}

fn errors(kind: &str, object: &Value) -> Vec<String> {
    check_object(kind, object)
        .err()
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn one_error(kind: &str, object: &Value) -> String {
    let all = errors(kind, object);
    assert_eq!(all.len(), 1, "{all:?}");
    all.into_iter().next().unwrap()
}

#[test]
fn a_complete_valid_member_cluster_passes() {
    let mc = member_cluster(json!({
        "heartbeat": {"intervalSeconds": 10, "gracePeriodSeconds": 40},
        "agent": {"publicKeys": [{"publicKey": "ndFGQpErfYyLlvrUb-Hu0AHwhxmFYAsInyGgLj_v3uo", "revoked": false}]},
        "readinessChecks": [{"name": "nodes", "readyNodes": {"minCount": 1}}],
        "livenessChecks": [
            {"name": "api", "periodSeconds": 5, "failureThreshold": 3,
             "http": {"url": "https://example.test/healthz", "method": "GET"}},
            {"name": "lua", "resourceSelectors": [{"group": "", "version": "v1", "kind": "Node"}],
             "condition": "function evaluate() return {pass = true} end"},
            {"name": "pods", "pod": {"template": {"spec": {"containers": [
                {"name": "c", "image": "busybox", "anything": {"goes": "here"}}]}}}}
        ]
    }));
    assert_eq!(errors("MemberCluster", &mc), Vec::<String>::new());
}

#[test]
fn a_typo_in_a_field_name_is_refused_with_the_nearest_known_name() {
    let set = json!({"apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet",
                     "metadata": {"name": "primary"},
                     "spec": {"maxReplicas": 1, "failover": {"tolerationSecond": 600}}});
    let e = one_error("ClusterSet", &set);
    assert!(
        e.starts_with("spec.failover.tolerationSecond: unknown field"),
        "{e}"
    );
    assert!(e.contains("did you mean \"tolerationSeconds\"?"), "{e}");
    let mc = member_cluster(json!({"livenesChecks": []}));
    let e = one_error("MemberCluster", &mc);
    assert!(
        e.contains("spec.livenesChecks") && e.contains("\"livenessChecks\""),
        "{e}"
    );
}

#[test]
fn values_the_crd_schema_refuses_are_refused() {
    let cases = [
        (
            json!({"readinessChecks": [{"name": "n", "periodSeconds": 0, "readyNodes": {"minCount": 1}}]}),
            "spec.readinessChecks[0].periodSeconds: must be at least 1",
        ),
        (
            json!({"readinessChecks": [{"name": "n", "readyNodes": {"minPercent": 500}}]}),
            "spec.readinessChecks[0].readyNodes.minPercent: must be at most 100",
        ),
        (
            json!({"livenessChecks": [{"name": "h", "http": {"url": "https://x.test", "method": "GET\r\nX: y"}}]}),
            "spec.livenessChecks[0].http.method: \"GET\\r\\nX: y\" does not match the pattern",
        ),
        (
            json!({"livenessChecks": [{"name": "t", "tcp": {"host": "x.test", "port": 0}}]}),
            "spec.livenessChecks[0].tcp.port: must be at least 1",
        ),
        (
            json!({"heartbeat": {"intervalSeconds": "10"}}),
            "spec.heartbeat.intervalSeconds: must be a whole number",
        ),
        (
            json!({"paused": "yes"}),
            "spec.paused: must be true or false",
        ),
    ];
    for (spec, expected) in cases {
        let e = one_error("MemberCluster", &member_cluster(spec.clone()));
        assert!(e.starts_with(expected), "{spec}: {e}");
    }
}

#[test]
fn names_and_metadata_are_checked_as_the_api_server_does() {
    let mut mc = member_cluster(json!({}));
    mc["metadata"] = json!({"name": "Edge_1", "namespace": "fleet"});
    assert!(
        one_error("MemberCluster", &mc)
            .starts_with("metadata.name: \"Edge_1\" is not a DNS subdomain")
    );
    mc["metadata"] = json!({"name": "edge-1", "namespace": "fleet.eu"});
    assert!(one_error("MemberCluster", &mc).starts_with("metadata.namespace"));
    mc["metadata"] = json!({"name": "edge-1", "lables": {"a": "b"}});
    assert!(one_error("MemberCluster", &mc).contains("did you mean \"labels\"?"));
    mc["metadata"] = json!({"name": "edge-1", "labels": {"tier": 1}});
    assert!(one_error("MemberCluster", &mc).starts_with("metadata.labels.tier: must be a string"));
}

#[test]
fn every_problem_of_a_manifest_is_listed_at_once() {
    let mc = member_cluster(
        json!({"heartbeat": {"intervalSeconds": 0, "gracePeriod": 40}, "pausd": true}),
    );
    let all = errors("MemberCluster", &mc);
    assert_eq!(all.len(), 3, "{all:?}");
}

#[test]
fn mirrors_are_checked_strictly_and_a_typo_names_the_field() {
    let good = member_cluster(json!({"mirrors": [
        {"apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster", "name": "edge-1"},
        {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "name": "edge-1",
         "taintEffect": "NoExecute"}
    ]}));
    assert_eq!(errors("MemberCluster", &good), Vec::<String>::new());
    let typo = member_cluster(json!({"mirrors": [
        {"apiVersion": "v1", "kind": "Secret", "name": "edge-1", "namespce": "argocd"}
    ]}));
    let e = one_error("MemberCluster", &typo);
    assert!(
        e.starts_with("spec.mirrors[0].namespce: unknown field"),
        "{e}"
    );
    assert!(e.contains("did you mean \"namespace\"?"), "{e}");
    let effect = member_cluster(json!({"mirrors": [
        {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "name": "a",
         "taintEffect": "PreferNoSchedule"}
    ]}));
    let e = one_error("MemberCluster", &effect);
    assert!(
        e.starts_with("spec.mirrors[0].taintEffect: must be one of"),
        "{e}"
    );
}

#[test]
fn a_header_from_a_secret_is_checked_strictly() {
    let probe = |header: Value| {
        member_cluster(json!({"livenessChecks": [{"name": "api", "http": {
            "url": "https://api.test/healthz", "httpHeaders": [header]}}]}))
    };
    let good = probe(json!({"name": "Authorization",
        "valueFrom": {"secretKeyRef": {"name": "probe-token", "key": "token", "optional": true}}}));
    assert_eq!(errors("MemberCluster", &good), Vec::<String>::new());
    let typo = probe(json!({"name": "Authorization",
        "valueFrom": {"secretKeyRf": {"name": "probe-token", "key": "token"}}}));
    let e = errors("MemberCluster", &typo).join("\n");
    assert!(
        e.contains("httpHeaders[0].valueFrom.secretKeyRf: unknown field")
            && e.contains("did you mean \"secretKeyRef\"?"),
        "{e}"
    );
    let no_key = probe(json!({"name": "Authorization",
        "valueFrom": {"secretKeyRef": {"name": "probe-token"}}}));
    let e = one_error("MemberCluster", &no_key);
    assert!(e.contains("secretKeyRef") && e.contains("key"), "{e}");
    let bad_name = probe(json!({"name": "Authorization",
        "valueFrom": {"secretKeyRef": {"name": "Probe_Token", "key": "token"}}}));
    let e = one_error("MemberCluster", &bad_name);
    assert!(
        e.starts_with("spec.livenessChecks[0].http.httpHeaders[0].valueFrom.secretKeyRef.name"),
        "{e}"
    );
}

/// The CEL rules of the CRDs are enforced in Rust by the specs' `validate` methods (the
/// embedded hub has no CEL): each rule of the generated schemas must be one of these, and
/// `validate.rs` has a test for each. A new rule fails here until it is paired.
#[test]
fn every_cel_rule_of_the_crds_has_a_rust_counterpart() {
    const PAIRED: &[&str] = &[
        "self.gracePeriodSeconds > self.intervalSeconds",
        "[has(self.condition), has(self.healthScript), has(self.pod), has(self.http), has(self.tcp), has(self.readyNodes), has(self.readyPods)].filter(x, x).size() == 1",
        "!(has(self.for) && has(self.duration))",
        "!has(self.taintEffect) || self.apiVersion.startsWith('cluster.karmada.io/')",
        "!has(self.detector) || !has(self.detector.minSilenceSeconds) || (self.detector.minSilenceSeconds > self.intervalSeconds && self.detector.minSilenceSeconds <= self.gracePeriodSeconds)",
        "self.publicKey != '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo'",
        "has(self.value) != has(self.valueFrom)",
    ];
    fn rules(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::Array(list)) = m.get("x-kubernetes-validations") {
                    out.extend(
                        list.iter()
                            .filter_map(|r| r["rule"].as_str().map(str::to_owned)),
                    );
                }
                m.values().for_each(|v| rules(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| rules(v, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    for schema in schemas().values() {
        rules(schema, &mut found);
    }
    assert!(!found.is_empty());
    for rule in found {
        assert!(
            PAIRED.contains(&rule.as_str()),
            "CEL rule without a Rust counterpart: {rule}"
        );
    }
}

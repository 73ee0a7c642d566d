//! Hardening and least privilege in the rendered manifests: every container non-root,
//! read-only, unprivileged; the hub probed over HTTPS; RBAC rules without wildcards, the
//! hub writing only what it must, the agent touching Secrets and creating pods only in its
//! own namespaces.

use serde_json::Value;

use super::rbac::{self, Grant, WRITE_VERBS};
use super::tools::{
    AGENT_MINIMAL, Chart, NAMESPACE, container, documents, every_rendering, of_kind, one, render,
    strings,
};

#[test]
fn every_container_runs_non_root_read_only_without_privileges_or_capabilities() {
    for (chart, name, yaml) in every_rendering() {
        let docs = documents(&yaml);
        let workloads: Vec<&Value> = docs
            .iter()
            .filter(|d| d["spec"]["template"]["spec"].is_object())
            .collect();
        assert!(!workloads.is_empty());
        for workload in workloads {
            let pod = &workload["spec"]["template"]["spec"];
            let what = format!("{} with {name}", chart.name());
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{what}");
            assert_eq!(
                pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
                "{what}"
            );
            let containers = ["initContainers", "containers"]
                .iter()
                .flat_map(|k| pod[k].as_array().cloned().unwrap_or_default());
            for c in containers {
                let sc = &c["securityContext"];
                let what = format!("{what}, container {}", c["name"]);
                assert_eq!(sc["runAsNonRoot"], true, "{what}");
                assert_eq!(sc["allowPrivilegeEscalation"], false, "{what}");
                assert_eq!(sc["readOnlyRootFilesystem"], true, "{what}");
                assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault", "{what}");
                assert!(sc["privileged"] != true, "{what}");
                assert_eq!(
                    sc["capabilities"]["drop"],
                    serde_json::json!(["ALL"]),
                    "{what}"
                );
                assert!(sc["capabilities"]["add"].is_null(), "{what}");
                assert!(c["resources"]["requests"]["memory"].is_string(), "{what}");
                assert!(c["resources"]["limits"]["memory"].is_string(), "{what}");
            }
        }
    }
}

#[test]
fn the_hub_is_probed_on_healthz_and_readyz_over_https_and_the_agent_over_http_on_its_metrics_port()
{
    let hub = documents(&render(Chart::Hub, &[]));
    let c = container(one(&hub, "Deployment"), "hub");
    for (probe, path) in [
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ] {
        assert_eq!(c[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(c[probe]["httpGet"]["scheme"], "HTTPS", "{probe}");
        assert_eq!(c[probe]["httpGet"]["port"], "https", "{probe}");
    }
    let services = of_kind(&hub, "Service");
    let named = |suffix: &str| {
        let name = format!("{}{suffix}", Chart::Hub.fullname());
        services
            .iter()
            .find(|s| s["metadata"]["name"] == name.as_str())
            .unwrap_or_else(|| panic!("a Service {name}"))
    };
    assert_eq!(
        services.len(),
        2,
        "the agents' Service and the admin Service"
    );
    let agents = named("");
    assert_eq!(agents["spec"]["ports"].as_array().map(Vec::len), Some(1));
    assert_eq!(agents["spec"]["ports"][0]["targetPort"], "https");
    // The read API and /metrics: a ClusterIP Service of their own, whatever service.type.
    let admin = named("-admin");
    assert_eq!(admin["spec"]["type"], "ClusterIP");
    assert_eq!(admin["spec"]["ports"][0]["targetPort"], "admin");
    let args = c["args"].as_array().unwrap();
    assert!(
        args.iter().any(|a| a == "--admin-listen=0.0.0.0:9443"),
        "{args:?}"
    );
    assert!(
        args.iter().any(|a| a == "--admin-auth=kubernetes"),
        "{args:?}"
    );
    let balanced = documents(&render(
        Chart::Hub,
        &strings(&["-f", "charts/fleetpulse-hub/ci/loadbalancer-values.yaml"]),
    ));
    for service in of_kind(&balanced, "Service") {
        let admin = service["metadata"]["name"]
            .as_str()
            .unwrap()
            .ends_with("-admin");
        let expected = if admin { "ClusterIP" } else { "LoadBalancer" };
        assert_eq!(service["spec"]["type"], expected, "{service}");
    }
    // The agent's own endpoint (`--listen`, plain HTTP): nothing of the heartbeat loop.
    let agent = documents(&render(Chart::Agent, &strings(AGENT_MINIMAL)));
    let c = container(one(&agent, "Deployment"), "agent");
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(c[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(c[probe]["httpGet"]["port"], "metrics", "{probe}");
        assert!(c[probe]["httpGet"]["scheme"].is_null(), "{probe}: HTTP");
    }
    assert_eq!(
        c["ports"].as_array().map(Vec::len),
        Some(1),
        "only the metrics port"
    );
}

fn hub_grants(args: &[String]) -> Vec<Grant> {
    let docs = documents(&render(Chart::Hub, args));
    rbac::grants(&docs, &Chart::Hub.fullname(), NAMESPACE)
}

fn agent_grants(args: &[String]) -> Vec<Grant> {
    let docs = documents(&render(Chart::Agent, args));
    rbac::grants(&docs, &Chart::Agent.fullname(), NAMESPACE)
}

#[test]
fn hub_rbac_names_every_verb_and_resource_and_writes_only_status_labels_events_its_lease_its_pod_its_state_mirrors_adoptions_and_enrolment()
 {
    for (name, args) in Chart::Hub.value_sets() {
        let grants = hub_grants(&args);
        assert!(!grants.is_empty(), "{name}");
        for g in &grants {
            let r = &g.rule;
            for list in [&r.verbs, &r.resources, &r.api_groups] {
                assert!(
                    !list.iter().any(|v| v.contains('*')),
                    "{name}: wildcard in {}: {r:?}",
                    g.source
                );
            }
            // Secrets: Argo CD's cluster Secrets, in its namespace, for mirrors and adoption;
            // the enrolment Secrets, in the hub's own namespace.
            let argocd = g.namespace.as_deref() == Some("argocd") && r.resources == ["secrets"];
            let enrolment = g.namespace.as_deref() == Some(NAMESPACE)
                && r.resources == ["secrets"]
                && r.verbs == ["get", "list", "watch", "create", "update"];
            assert!(
                argocd || enrolment || !r.resources.iter().any(|x| x.starts_with("secrets")),
                "{name}: {r:?}"
            );
            // The hub state: ConfigMaps of the hub's own namespace (replicas sharing the
            // fleet also get their shards' objects, and delete none).
            let state = g.namespace.as_deref() == Some(NAMESPACE)
                && r.resources == ["configmaps"]
                && (r.verbs == ["list", "create", "patch", "delete"]
                    || r.verbs == ["list", "create"]
                    || r.verbs == ["get", "patch"] && !r.resource_names.is_empty());
            assert!(
                state || !r.resources.iter().any(|x| x == "configmaps"),
                "{name}: {r:?}"
            );
            let mirror_kind = |group: &str| {
                r.resources.iter().all(|x| {
                    super::mirrors::KINDS
                        .iter()
                        .any(|(_, g, resource)| *g == group && resource == x)
                })
            };
            for verb in r.verbs.iter().filter(|v| WRITE_VERBS.contains(&v.as_str())) {
                let allowed = match (r.api_groups.as_slice(), verb.as_str()) {
                    // Labels (and a taint) on the mirror objects of the enabled kinds.
                    ([group], "patch") if mirror_kind(group) && (!group.is_empty() || argocd) => {
                        true
                    }
                    ([group], "patch") if group == "fleetpulse.io" => r
                        .resources
                        .iter()
                        .all(|x| x == "memberclusters" || x.ends_with("/status")),
                    // Adoption creates MemberClusters (server-side apply's first write).
                    ([group], "create") if group == "fleetpulse.io" => {
                        r.resources == ["memberclusters"]
                    }
                    // Enrolment: tokens marked used and key sets, in the hub's namespace.
                    ([group], "create" | "update") if group.is_empty() => enrolment || state,
                    ([group], "delete") if group.is_empty() => state,
                    ([group], "create" | "patch") if group == "events.k8s.io" => {
                        r.resources == ["events"]
                    }
                    // Reviews of the admin port's callers: answered, nothing stored.
                    ([group], "create") if group == "authentication.k8s.io" => {
                        r.resources == ["tokenreviews"]
                    }
                    ([group], "create") if group == "authorization.k8s.io" => {
                        r.resources == ["subjectaccessreviews"]
                    }
                    // The leader Lease, or the shard Leases of replicas sharing the fleet
                    // (updated by name only).
                    ([group], "create" | "patch") if group == "coordination.k8s.io" => {
                        r.resources == ["leases"] && g.namespace.as_deref() == Some(NAMESPACE)
                    }
                    ([group], "update") if group == "coordination.k8s.io" => {
                        r.resources == ["leases"]
                            && g.namespace.as_deref() == Some(NAMESPACE)
                            && !r.resource_names.is_empty()
                    }
                    // The leader label on the hub's own Pod, in its own namespace only.
                    ([group], "patch") if group.is_empty() => {
                        state
                            || r.resources == ["pods"] && g.namespace.as_deref() == Some(NAMESPACE)
                    }
                    _ => false,
                };
                assert!(allowed, "{name}: {} may {verb} {r:?}", g.source);
            }
        }
    }
}

#[test]
fn agent_rbac_reads_cluster_wide_but_touches_secrets_and_creates_pods_only_in_its_namespaces() {
    let sets = [
        ("minimal", strings(AGENT_MINIMAL)),
        (
            "all features",
            strings(&["-f", "charts/fleetpulse-agent/ci/all-features-values.yaml"]),
        ),
        (
            "existing key",
            strings(&["-f", "charts/fleetpulse-agent/ci/existing-key-values.yaml"]),
        ),
    ];
    for (name, args) in sets {
        let grants = agent_grants(&args);
        let checks_ns = if name == "all features" {
            "fleetpulse-checks"
        } else {
            NAMESPACE
        };
        let mut secret_rules = 0;
        for g in &grants {
            let r = &g.rule;
            assert!(!r.verbs.iter().any(|v| v == "*"), "{name}: {r:?}");
            assert!(!r.resources.iter().any(|v| v == "*"), "{name}: {r:?}");
            if g.namespace.is_none() {
                assert!(
                    r.verbs
                        .iter()
                        .all(|v| ["get", "list", "watch"].contains(&v.as_str())),
                    "{name}: cluster-wide {} grants more than reading: {r:?}",
                    g.source
                );
                assert!(
                    !r.resources.iter().any(|x| x.starts_with("secrets")),
                    "{name}: {r:?}"
                );
            }
            if r.resources.iter().any(|x| x == "secrets") && g.source.ends_with("-probe-secrets") {
                // checks.secretNames: get on exactly those, in the checks namespace.
                secret_rules += 1;
                assert_eq!(g.namespace.as_deref(), Some(checks_ns), "{name}: {r:?}");
                assert!(
                    r.verbs == ["get"] && r.resource_names == ["probe-token"],
                    "{name}: {r:?}"
                );
            } else if r.resources.iter().any(|x| x == "secrets") {
                secret_rules += 1;
                assert_eq!(g.namespace.as_deref(), Some(NAMESPACE), "{name}: {r:?}");
                let named = !r.resource_names.is_empty();
                assert!(
                    r.verbs == ["create"]
                        || (named && r.resource_names == ["fleetpulse-agent-key"]),
                    "{name}: only create may go without resourceNames: {r:?}"
                );
            }
            let writes_pods = r.resources.iter().any(|x| x == "pods")
                && r.verbs.iter().any(|v| WRITE_VERBS.contains(&v.as_str()));
            if writes_pods {
                assert_eq!(g.namespace.as_deref(), Some(checks_ns), "{name}: {r:?}");
            }
        }
        // The key's two; all features adds the probe Secrets' (checks.secretNames).
        let expected_secret_rules = match name {
            "existing key" => 0,
            "all features" => 3,
            _ => 2,
        };
        assert_eq!(secret_rules, expected_secret_rules, "{name}");
    }
}

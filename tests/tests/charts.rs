//! The Helm charts (`charts/fleetpulse-hub`, `charts/fleetpulse-agent`), tested with a real
//! helm and kubernetes-validate, which `bash scripts/install-chart-tools.sh` installs into
//! `.tools/` (or point `FLEETPULSE_HELM` / `FLEETPULSE_KUBERNETES_VALIDATE` at them). A
//! missing tool fails every test here with that command; nothing is skipped.
//!
//! - `helm lint --strict` passes for every value set, and every rendering (defaults, and
//!   each `ci/*-values.yaml`: cert-manager TLS, ingress, ServiceMonitor, 2 replicas,
//!   LoadBalancer, replicas sharing the fleet, existing key Secret, proxy, hub CA, checks
//!   namespace) validates with
//!   `kubernetes-validate --strict` against the oldest and the newest Kubernetes;
//! - invalid values (wrong type, unknown key, replicas 0, plain-http hub URL, ...) are
//!   refused by helm with a message naming the value;
//! - every container is hardened; the RBAC rules are least privilege (no wildcards in the
//!   hub's, which writes only status, labels, Events, its Lease and Pod, and the enabled
//!   mirror kinds, MemberClusters it adopts, Secrets only Argo CD's in its namespace and
//!   the enrolment Secrets in its own; Secrets only namespaced for
//!   the agent, pods created only in the checks namespace);
//! - the CRDs helm installs are the ones the Rust types generate;
//! - the NOTES' public-key command is the agent's `pubkey` on its key Secret, and every command
//!   in both charts' NOTES is valid shell as pasted (`bash -n`);
//! - (`charts/observability.rs`) the dashboard ConfigMap and the PrometheusRule render as
//!   their values ask, and every metric they (and docs/metrics.md) name is exposed by a
//!   running hub or agent;
//! - (`charts/operations.rs`) agent probes and ServiceMonitor, PodDisruptionBudgets,
//!   NetworkPolicies, digests, extra volumes and env, the hub CA from a Secret, IPv6 hub
//!   URLs, and default images equal to what `scripts/build-images.sh` tags;
//! - (`charts/mirrors.rs`) RBAC on exactly the enabled mirror kinds, the mirror defaults
//!   as `--mirror-default` flags;
//! - (`charts/sharding.rs`) replicas sharing the fleet: a StatefulSet with the shard
//!   flags, a DNS name per replica, RBAC naming exactly the shard Leases and state objects
//!   (and allowing every call two sharded replicas make against a recording API server);
//!   sharding off renders as before;
//! - (`charts/live.rs`) the RBAC rules allow every call the real hub and agent make against
//!   a recording Kubernetes API server (with every feature on, mirrors included), and
//!   neither is granted anything it does not use.

#[path = "charts/live.rs"]
mod live;
#[path = "charts/mirrors.rs"]
mod mirrors;
#[path = "charts/notes.rs"]
mod notes;
#[path = "charts/observability.rs"]
mod observability;
#[path = "charts/operations.rs"]
mod operations;
#[path = "charts/rbac.rs"]
mod rbac;
#[path = "charts/security.rs"]
mod security;
#[path = "charts/sharding.rs"]
mod sharding;
#[path = "charts/tools.rs"]
mod tools;
#[path = "charts/values.rs"]
mod values;

use serde_json::Value;

use fleetpulse_common::api::crds;
use tools::{
    Chart, KINDS_WITHOUT_SCHEMA, KUBERNETES_VERSIONS, documents, every_rendering, helm, of_kind,
    render, strings,
};

#[test]
fn both_charts_pass_helm_lint_strict_with_every_value_set() {
    for chart in [Chart::Hub, Chart::Agent] {
        for (name, args) in chart.value_sets() {
            let mut lint = strings(&["lint", "--strict"]);
            lint.push(chart.dir());
            lint.extend(args);
            let out = helm(&lint);
            assert!(
                out.status.success(),
                "helm lint --strict {} with {name}:\n{}{}",
                chart.name(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn every_rendering_passes_kubernetes_validate_strict_on_oldest_and_newest_kubernetes() {
    for (chart, name, yaml) in every_rendering() {
        for version in KUBERNETES_VERSIONS {
            let warnings = tools::validate(&yaml, version).unwrap_or_else(|e| {
                panic!(
                    "{} with {name} against Kubernetes {version}:\n{e}",
                    chart.name()
                )
            });
            for warning in warnings {
                assert!(
                    KINDS_WITHOUT_SCHEMA
                        .iter()
                        .any(|k| warning.contains(&format!("schema for kind {k} "))),
                    "{} with {name}: unexpected warning {warning}",
                    chart.name()
                );
            }
        }
    }
}

#[test]
fn helm_installs_exactly_the_crds_the_rust_types_generate() {
    let docs = documents(&render(Chart::Hub, &[]));
    let mut installed: Vec<&Value> = of_kind(&docs, "CustomResourceDefinition");
    installed.sort_by_key(|c| c["metadata"]["name"].as_str().unwrap().to_owned());
    let mut generated: Vec<Value> = crds::all()
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    generated.sort_by_key(|c| c["metadata"]["name"].as_str().unwrap().to_owned());
    assert_eq!(installed.len(), generated.len());
    for (helm_crd, rust_crd) in installed.into_iter().zip(&generated) {
        assert!(
            helm_crd == rust_crd,
            "{} in charts/fleetpulse-hub/crds differs from the Rust types; regenerate with \
             `cargo run -p fleetpulse-hub -- crds --out-dir charts/fleetpulse-hub/crds`",
            rust_crd["metadata"]["name"]
        );
    }
}

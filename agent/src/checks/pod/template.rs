//! The pod of one run, from a check's `template` (pure), and the labels that find the pods
//! of a check again.
//!
//! From the template the pod keeps the labels, annotations and spec; the agent sets:
//! - `generateName: fleetpulse-<check>-` and the namespace of the check;
//! - labels `app.kubernetes.io/managed-by: fleetpulse-agent`,
//!   `checks.fleetpulse.io/check: <check>`, `checks.fleetpulse.io/round: <n>` (over any
//!   template label of the same key);
//! - `restartPolicy: Never` (a run is one attempt);
//! - `activeDeadlineSeconds` capped at the run timeout, so the kubelet stops a run even if
//!   the agent is gone by then (a smaller value from the template is kept).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Label key naming the manager of check pods.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value on pods this agent creates.
pub const MANAGED_BY_VALUE: &str = "fleetpulse-agent";
/// Label key holding the check name.
pub const CHECK_LABEL: &str = "checks.fleetpulse.io/check";
/// Label key holding the run's round number (1, 2, ... per agent start).
pub const ROUND_LABEL: &str = "checks.fleetpulse.io/round";

/// A template that cannot become a pod.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The template has no `spec`.
    #[error("`pod.template.spec` is missing: give the pod's spec with at least one container")]
    MissingSpec,
    /// The template's spec has no containers.
    #[error("`pod.template.spec.containers` is empty: give at least one container to run")]
    NoContainers,
}

/// `fleetpulse-<check>-`: the API server appends a random suffix.
pub fn generate_name(check: &str) -> String {
    format!("fleetpulse-{check}-")
}

/// The label selector of every pod of `check` this agent (or an earlier one) created.
pub fn check_selector(check: &str) -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{CHECK_LABEL}={check}")
}

/// The pod for round `round` of `check` in `namespace`, stopped by the kubelet after
/// `run_timeout_seconds` at the latest.
pub fn build_pod(
    check: &str,
    namespace: &str,
    template: &PodTemplateSpec,
    round: u64,
    run_timeout_seconds: u32,
) -> Result<Pod, TemplateError> {
    let mut spec = template.spec.clone().ok_or(TemplateError::MissingSpec)?;
    if spec.containers.is_empty() {
        return Err(TemplateError::NoContainers);
    }
    spec.restart_policy = Some("Never".to_owned());
    let deadline = i64::from(run_timeout_seconds);
    spec.active_deadline_seconds = Some(
        spec.active_deadline_seconds
            .map_or(deadline, |d| d.min(deadline)),
    );
    let template_meta = template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = template_meta.labels.unwrap_or_default();
    labels.insert(MANAGED_BY_LABEL.to_owned(), MANAGED_BY_VALUE.to_owned());
    labels.insert(CHECK_LABEL.to_owned(), check.to_owned());
    labels.insert(ROUND_LABEL.to_owned(), round.to_string());
    Ok(Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name(check)),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels),
            annotations: template_meta.annotations,
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(value: serde_json::Value) -> PodTemplateSpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn pod_gets_name_namespace_labels_and_never_restarts() {
        let t = template(json!({
            "metadata": { "name": "ignored", "namespace": "ignored",
                          "labels": { "team": "net", "checks.fleetpulse.io/check": "spoof" } },
            "spec": { "restartPolicy": "Always",
                      "containers": [{ "name": "dig", "image": "busybox" }] }
        }));
        let pod = build_pod("dns", "fleetpulse-checks", &t, 7, 120).unwrap();
        let meta = &pod.metadata;
        assert_eq!(meta.name, None);
        assert_eq!(meta.generate_name.as_deref(), Some("fleetpulse-dns-"));
        assert_eq!(meta.namespace.as_deref(), Some("fleetpulse-checks"));
        let labels = meta.labels.as_ref().unwrap();
        assert_eq!(labels["team"], "net");
        assert_eq!(labels[MANAGED_BY_LABEL], MANAGED_BY_VALUE);
        assert_eq!(labels[CHECK_LABEL], "dns");
        assert_eq!(labels[ROUND_LABEL], "7");
        let spec = pod.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(spec.active_deadline_seconds, Some(120));
    }

    #[test]
    fn shorter_template_deadline_is_kept() {
        let t = template(json!({ "spec": { "activeDeadlineSeconds": 30,
                                           "containers": [{ "name": "c" }] } }));
        let pod = build_pod("x", "ns", &t, 1, 120).unwrap();
        assert_eq!(pod.spec.unwrap().active_deadline_seconds, Some(30));
    }

    #[test]
    fn template_without_spec_or_containers_is_refused() {
        let no_spec = template(json!({}));
        assert!(matches!(
            build_pod("x", "ns", &no_spec, 1, 120),
            Err(TemplateError::MissingSpec)
        ));
        let no_containers = template(json!({ "spec": { "containers": [] } }));
        assert!(matches!(
            build_pod("x", "ns", &no_containers, 1, 120),
            Err(TemplateError::NoContainers)
        ));
    }

    #[test]
    fn selector_matches_managed_pods_of_the_check() {
        assert_eq!(
            check_selector("dns"),
            "app.kubernetes.io/managed-by=fleetpulse-agent,checks.fleetpulse.io/check=dns"
        );
    }
}

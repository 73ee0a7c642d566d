//! What the hub shows of the objects it holds (read API, `get -o yaml`, `describe`): the
//! specs without the inline values of HTTP probe headers and the passwords in probe URLs
//! ([`REDACTED`](super::REDACTED) in their place) and without kubectl's
//! last-applied-configuration annotation, which repeats the spec as it was applied, values
//! included. Agents still get the full checks in their config: they need the values to
//! send them.

use super::{ClusterCheck, HealthPolicy, MemberCluster};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The annotation `kubectl apply` keeps a copy of the applied object in.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

impl ClusterCheck {
    /// Replaces the inline values of an HTTP probe's headers, and its URL's password, with
    /// [`REDACTED`](super::REDACTED).
    pub fn redact(&mut self) {
        if let Some(http) = &mut self.http {
            http.redact();
        }
    }
}

/// Redacts both check lists and drops the last-applied copy of the spec.
fn redact(meta: &mut ObjectMeta, readiness: &mut [ClusterCheck], liveness: &mut [ClusterCheck]) {
    readiness
        .iter_mut()
        .chain(liveness)
        .for_each(ClusterCheck::redact);
    if let Some(annotations) = &mut meta.annotations {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
}

impl MemberCluster {
    /// The MemberCluster as the hub shows it: no inline header value, no last-applied
    /// copy of the spec.
    pub fn redacted(mut self) -> Self {
        let spec = &mut self.spec;
        redact(
            &mut self.metadata,
            &mut spec.readiness_checks,
            &mut spec.liveness_checks,
        );
        self
    }
}

impl HealthPolicy {
    /// The HealthPolicy as the hub shows it: no inline header value, no last-applied
    /// copy of the spec.
    pub fn redacted(mut self) -> Self {
        let spec = &mut self.spec;
        redact(
            &mut self.metadata,
            &mut spec.readiness_checks,
            &mut spec.liveness_checks,
        );
        self
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::REDACTED;

    fn policy_with_token() -> HealthPolicy {
        serde_json::from_value(json!({
            "apiVersion": "fleetpulse.io/v1alpha1", "kind": "HealthPolicy",
            "metadata": {"name": "p", "namespace": "fleet", "annotations": {
                LAST_APPLIED_ANNOTATION: "{\"spec\":{\"livenessChecks\":[{\"http\":{\"httpHeaders\":[{\"value\":\"Bearer s3cret\"}]}}]}}",
                "team": "platform"}},
            "spec": {"livenessChecks": [{"name": "api", "http": {
                "url": "https://probe:urlpass@api.test/healthz",
                "httpHeaders": [
                    {"name": "Authorization", "value": "Bearer s3cret"},
                    {"name": "X-Token", "valueFrom": {"secretKeyRef": {"name": "probe", "key": "token"}}}
                ]}}]}
        }))
        .unwrap()
    }

    #[test]
    fn inline_header_values_url_passwords_and_the_last_applied_copy_are_not_shown() {
        let shown = policy_with_token().redacted();
        let text = serde_json::to_string(&shown).unwrap();
        assert!(
            !text.contains("s3cret") && !text.contains("urlpass"),
            "{text}"
        );
        let http = shown.spec.liveness_checks[0].http.as_ref().unwrap();
        assert_eq!(
            http.url.as_deref(),
            Some("https://probe:<redacted>@api.test/healthz")
        );
        let headers = &http.http_headers;
        assert_eq!(headers[0].value.as_deref(), Some(REDACTED));
        assert_eq!(headers[0].name, "Authorization");
        // A reference names a Secret, not its content: it stays as written.
        assert_eq!(
            headers[1],
            policy_with_token().spec.liveness_checks[0]
                .http
                .as_ref()
                .unwrap()
                .http_headers[1]
        );
        let annotations = shown.metadata.annotations.unwrap();
        assert_eq!(annotations.keys().collect::<Vec<_>>(), ["team"]);
    }

    #[test]
    fn a_member_cluster_is_redacted_in_both_check_lists() {
        let check = policy_with_token().spec.liveness_checks[0].clone();
        let mut mc = MemberCluster::new("edge-1", Default::default());
        mc.spec.readiness_checks = vec![check.clone()];
        mc.spec.liveness_checks = vec![check];
        let text = serde_json::to_string(&mc.redacted()).unwrap();
        assert!(
            !text.contains("s3cret") && text.contains(REDACTED),
            "{text}"
        );
    }
}

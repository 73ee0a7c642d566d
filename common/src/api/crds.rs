//! The CustomResourceDefinitions, generated from the Rust types. `fleetpulse-hub crds`
//! prints them; the chart's checked-in copy is compared against this in a test.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use super::{ClusterSet, HealthPolicy, MemberCluster, Set};

/// Every fleetpulse CRD, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        MemberCluster::crd(),
        ClusterSet::crd(),
        Set::crd(),
        HealthPolicy::crd(),
    ]
}

/// Every CRD as one multi-document YAML stream.
pub fn to_yaml() -> String {
    let mut out = String::new();
    for crd in all() {
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&crd).expect("a CRD always serializes to YAML"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crds_are_structural_and_carry_printer_columns() {
        for crd in all() {
            let version = &crd.spec.versions[0];
            assert!(
                version
                    .subresources
                    .as_ref()
                    .and_then(|s| s.status.as_ref())
                    .is_some()
            );
            let schema = serde_json::to_value(&version.schema).unwrap();
            assert_eq!(
                schema["openAPIV3Schema"]["type"], "object",
                "{}",
                crd.spec.names.kind
            );
        }
        let mc = MemberCluster::crd();
        let cols: Vec<_> = mc.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            cols,
            ["Reachable", "Ready", "Healthy", "Since", "Reason", "Age"]
        );
    }

    #[test]
    fn check_kind_one_of_rule_is_in_the_schema() {
        let yaml = to_yaml();
        assert!(yaml.contains("set exactly one check kind"));
        assert!(yaml.contains("gracePeriodSeconds must be longer than intervalSeconds"));
    }
}

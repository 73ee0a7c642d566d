//! The `fleetpulse.io/v1alpha1` API: custom resources, their status, and the client-side
//! validation the embedded hub applies where no API server validates for it.

pub mod check;
pub mod cluster_set;
pub mod condition;
pub mod crds;
pub mod health_policy;
pub mod member_cluster;
pub mod mirror;
pub mod redact;
pub mod schema;

pub use check::*;
pub use cluster_set::*;
pub use condition::*;
pub use health_policy::*;
pub use member_cluster::*;
pub use mirror::*;

/// The API group of every fleetpulse resource.
pub const GROUP: &str = "fleetpulse.io";
/// The API version of every fleetpulse resource.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` as written in manifests.
pub const API_VERSION: &str = "fleetpulse.io/v1alpha1";

/// A schema for fields that hold an arbitrary Kubernetes object (e.g. a Pod template):
/// kept as an object with unknown fields preserved, so the CRD stays small.
pub fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

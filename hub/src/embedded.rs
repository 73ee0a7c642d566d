//! Embedded mode, the default with no Kubernetes: objects come from a directory of the
//! same YAML users would `kubectl apply` ([`manifests`]), and state lives in the embedded
//! store.

pub mod manifests;

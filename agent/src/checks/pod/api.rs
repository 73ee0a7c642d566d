//! [`PodApi`]: the few Kubernetes operations a pod check needs, behind a small trait so
//! the runner is tested without an API server. [`KubePodApi`](super::KubePodApi) is the
//! real implementation; the tests' fake lives beside the runner's tests.
//!
//! Design: the methods return `impl Future + Send` (as [`crate::hub_client::HubClient`]
//! does), so the runner is generic over its API (`PodCheckRunner<A: PodApi>`) rather than
//! holding a `dyn PodApi`: no boxing, no `async_trait`, and implementations write plain
//! `async fn`s. The trait is therefore not object-safe; nothing needs it to be.

use std::fmt;
use std::future::Future;

use k8s_openapi::api::core::v1::Pod;

/// A boxed error from the API client (or a test double).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The Kubernetes operations of a pod check, all on namespaced pods. Implementations must
/// be cancel-safe: dropping a returned future abandons the request.
pub trait PodApi: Send + Sync + 'static {
    /// Creates `pod` (with `generateName`) in `namespace`; returns it as created, with its
    /// name.
    fn create(
        &self,
        namespace: &str,
        pod: &Pod,
    ) -> impl Future<Output = Result<Pod, PodApiError>> + Send;

    /// Reads a pod (its phase, conditions and container statuses); `None` when it does
    /// not exist.
    fn get(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Pod>, PodApiError>> + Send;

    /// The last `tail_lines` lines of `container`'s log.
    fn log_tail(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail_lines: u32,
    ) -> impl Future<Output = Result<String, PodApiError>> + Send;

    /// Deletes a pod; a pod that is already gone is not an error.
    fn delete(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), PodApiError>> + Send;

    /// The pods of `namespace` matching `label_selector` (the Kubernetes string form).
    fn list(
        &self,
        namespace: &str,
        label_selector: &str,
    ) -> impl Future<Output = Result<Vec<Pod>, PodApiError>> + Send;
}

/// A pod operation the API refused or could not answer.
#[derive(Debug, thiserror::Error)]
pub enum PodApiError {
    /// RBAC does not allow the agent this operation.
    #[error(
        "the agent may not {verb} {resource}{} in namespace {namespace}: {source}; grant its \
         service account `{verb}` on `{resource}` there (see the agent chart's RBAC)",
        OnPod(.name)
    )]
    Forbidden {
        /// `create`, `get`, `delete` or `list`.
        verb: &'static str,
        /// `pods` or `pods/log`.
        resource: &'static str,
        /// The namespace.
        namespace: String,
        /// The pod, when the operation names one.
        name: Option<String>,
        /// The API's answer.
        #[source]
        source: BoxError,
    },
    /// Any other failure: the namespace does not exist, the API server is unreachable, the
    /// template is invalid, ...
    #[error("cannot {verb} {resource}{} in namespace {namespace}: {source}", OnPod(.name))]
    Request {
        /// `create`, `get`, `delete` or `list`.
        verb: &'static str,
        /// `pods` or `pods/log`.
        resource: &'static str,
        /// The namespace.
        namespace: String,
        /// The pod, when the operation names one.
        name: Option<String>,
        /// The client's error.
        #[source]
        source: BoxError,
    },
}

/// ` of pod NAME`, or nothing.
struct OnPod<'a>(&'a Option<String>);

impl fmt::Display for OnPod<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(name) => write!(f, " (pod {name})"),
            None => Ok(()),
        }
    }
}

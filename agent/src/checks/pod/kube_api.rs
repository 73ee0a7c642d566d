//! [`KubePodApi`]: [`PodApi`] over `kube::Api<Pod>`, one namespaced `Api` per call.
//!
//! RBAC the agent needs in each namespace pod checks run in: `pods` create, get, list,
//! delete; `pods/log` get.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, LogParams, PostParams};

use super::api::{PodApi, PodApiError};

/// At most this much log is transferred for a tail (the runner keeps far less).
const LOG_LIMIT_BYTES: i64 = 64 * 1024;

/// The pods of the managed cluster, through its API server.
#[derive(Clone)]
pub struct KubePodApi {
    client: kube::Client,
}

impl KubePodApi {
    /// Pod operations through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for KubePodApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubePodApi").finish_non_exhaustive()
    }
}

/// Sorts a kube error into [`PodApiError`].
fn api_error(
    verb: &'static str,
    resource: &'static str,
    namespace: &str,
    name: Option<&str>,
    error: kube::Error,
) -> PodApiError {
    let forbidden = matches!(&error, kube::Error::Api(status) if status.is_forbidden());
    let (namespace, name, source) = (namespace.to_owned(), name.map(str::to_owned), error.into());
    if forbidden {
        PodApiError::Forbidden {
            verb,
            resource,
            namespace,
            name,
            source,
        }
    } else {
        PodApiError::Request {
            verb,
            resource,
            namespace,
            name,
            source,
        }
    }
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_not_found())
}

impl PodApi for KubePodApi {
    async fn create(&self, namespace: &str, pod: &Pod) -> Result<Pod, PodApiError> {
        self.pods(namespace)
            .create(&PostParams::default(), pod)
            .await
            .map_err(|e| api_error("create", "pods", namespace, None, e))
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<Option<Pod>, PodApiError> {
        self.pods(namespace)
            .get_opt(name)
            .await
            .map_err(|e| api_error("get", "pods", namespace, Some(name), e))
    }

    async fn log_tail(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail_lines: u32,
    ) -> Result<String, PodApiError> {
        let params = LogParams {
            container: Some(container.to_owned()),
            tail_lines: Some(i64::from(tail_lines)),
            limit_bytes: Some(LOG_LIMIT_BYTES),
            ..LogParams::default()
        };
        self.pods(namespace)
            .logs(name, &params)
            .await
            .map_err(|e| api_error("get", "pods/log", namespace, Some(name), e))
    }

    async fn delete(&self, namespace: &str, name: &str) -> Result<(), PodApiError> {
        match self
            .pods(namespace)
            .delete(name, &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if is_not_found(&error) => Ok(()),
            Err(error) => Err(api_error("delete", "pods", namespace, Some(name), error)),
        }
    }

    async fn list(&self, namespace: &str, label_selector: &str) -> Result<Vec<Pod>, PodApiError> {
        self.pods(namespace)
            .list(&ListParams::default().labels(label_selector))
            .await
            .map(|list| list.items)
            .map_err(|e| api_error("list", "pods", namespace, None, e))
    }
}

//! Reading the objects checks look at. [`ResourceReader`] is the seam: [`KubeReader`] reads
//! the cluster's API server (discovery plus the dynamic API), [`StaticReader`] serves
//! objects held in memory (the offline `eval` command, tests, and the hub's manifests).
//!
//! Every reader applies the whole [`Query`] (labels, filters, objects being deleted), so
//! callers get exactly the selected objects. A kind the cluster does not serve yields no
//! objects, not an error (as Sveltos does).

use std::future::Future;
use std::sync::Arc;

use parking_lot::RwLock;

use serde_json::Value;

use fleetpulse_common::checks::query::Query;
use fleetpulse_common::compact::CompactObject;
use k8s_openapi::api::core::v1::Secret;

use super::probe::headers::SecretData;

pub mod cache;
mod cached_reader;
mod kube_reader;

pub use cached_reader::CachedReader;
pub use kube_reader::{KubeReader, PAGE_SIZE};

/// Objects could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The API server refused or failed.
    #[error("reading {what}: {source}")]
    Api {
        /// What was being read, e.g. `v1/Node in all namespaces`.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The watch cache of what is being read has not completed its first list yet.
    #[error(
        "the agent's cache of {what} has not synced yet: its first list and watch are under \
         way{}; the check fails until they complete",
        last_error.as_ref().map(|e| format!(" (last error: {e})")).unwrap_or_default()
    )]
    Syncing {
        /// The cache, e.g. `v1/Pod in all namespaces`.
        what: String,
        /// Why the last list or watch failed, if it did.
        last_error: Option<String>,
    },
    /// The reader has no Kubernetes API behind it.
    #[error("no Kubernetes API to read {what}; run the agent in-cluster or pass --kubeconfig")]
    NoApi {
        /// What was being read.
        what: String,
    },
}

/// Reads objects and the API server's readiness.
pub trait ResourceReader: Send + Sync + 'static {
    /// The objects `query` selects.
    fn list(&self, query: &Query) -> impl Future<Output = Result<Vec<Value>, ReadError>> + Send;
    /// The objects `query` selects, as compact JSON text (what a Lua round keeps). A reader
    /// of an API server holds at most a page of them as values at a time; by default, the
    /// objects of [`ResourceReader::list`] made compact.
    fn list_compact(
        &self,
        query: &Query,
    ) -> impl Future<Output = Result<Vec<CompactObject>, ReadError>> + Send {
        async move {
            let objects = self.list(query).await?;
            Ok(objects.into_iter().map(CompactObject::from).collect())
        }
    }
    /// The API server's `/readyz`: `Ok(body)` when ready.
    fn readyz(&self) -> impl Future<Output = Result<String, ReadError>> + Send;
    /// The data of Secret `namespace/name` (what HTTP probe headers reference), `None`
    /// when there is no such Secret.
    fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<SecretData>, ReadError>> + Send;
}

/// A Secret's `data` (and `stringData`, which objects held in memory may use) by key.
fn secret_data(secret: Secret) -> SecretData {
    let mut data: SecretData = (secret.data.into_iter().flatten())
        .map(|(k, v)| (k, v.0))
        .collect();
    for (k, v) in secret.string_data.into_iter().flatten() {
        data.insert(k, v.into_bytes());
    }
    data
}

fn describe(query: &Query) -> String {
    let scope = query
        .namespace
        .as_deref()
        .map_or("in all namespaces".to_owned(), |ns| {
            format!("in namespace {ns}")
        });
    format!("{}/{} {scope}", query.api_version(), query.kind)
}

/// Objects held in memory; clones share them, so a test can change what a running engine
/// sees with [`StaticReader::replace`].
#[derive(Clone, Debug, Default)]
pub struct StaticReader {
    objects: Arc<RwLock<Vec<Value>>>,
    ready: bool,
}

impl StaticReader {
    /// A reader over `objects`, whose API server counts as ready.
    pub fn new(objects: Vec<Value>) -> Self {
        Self {
            objects: Arc::new(RwLock::new(objects)),
            ready: true,
        }
    }

    /// Replaces the objects every clone of this reader serves.
    pub fn replace(&self, objects: Vec<Value>) {
        *self.objects.write() = objects;
    }

    /// Makes `/readyz` fail (for tests).
    pub fn not_ready(mut self) -> Self {
        self.ready = false;
        self
    }
}

impl ResourceReader for StaticReader {
    async fn list(&self, query: &Query) -> Result<Vec<Value>, ReadError> {
        Ok(self
            .objects
            .read()
            .iter()
            .filter(|o| query.matches(o))
            .cloned()
            .collect())
    }

    async fn readyz(&self) -> Result<String, ReadError> {
        if self.ready {
            Ok("ok".into())
        } else {
            Err(ReadError::NoApi {
                what: "/readyz".into(),
            })
        }
    }
    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<SecretData>, ReadError> {
        let found = self
            .objects
            .read()
            .iter()
            .find(|o| {
                o["apiVersion"] == "v1"
                    && o["kind"] == "Secret"
                    && o["metadata"]["namespace"] == namespace
                    && o["metadata"]["name"] == name
            })
            .cloned();
        Ok(found
            .and_then(|o| serde_json::from_value::<Secret>(o).ok())
            .map(secret_data))
    }
}

#[cfg(test)]
mod tests;

/// The reader an agent runs with: the cluster's API, objects in memory, or none (an agent
/// outside any cluster: resource checks and built-ins then fail with a clear message).
#[derive(Clone)]
pub enum Reader {
    /// A Kubernetes API.
    Kube(KubeReader),
    /// A Kubernetes API, with watch-fed caches for Lua checks (the check engine makes a
    /// `Kube` reader into one).
    Cached(CachedReader),
    /// Objects in memory.
    Static(StaticReader),
    /// No Kubernetes API.
    None,
}

impl Reader {
    /// Whether there is a Kubernetes API (or a stand-in) to check.
    pub fn has_api(&self) -> bool {
        !matches!(self, Reader::None)
    }
}

impl ResourceReader for Reader {
    async fn list(&self, query: &Query) -> Result<Vec<Value>, ReadError> {
        match self {
            Reader::Kube(r) => r.list(query).await,
            Reader::Cached(r) => r.list(query).await,
            Reader::Static(r) => r.list(query).await,
            Reader::None => Err(ReadError::NoApi {
                what: describe(query),
            }),
        }
    }

    async fn list_compact(&self, query: &Query) -> Result<Vec<CompactObject>, ReadError> {
        match self {
            Reader::Kube(r) => r.list_compact(query).await,
            Reader::Cached(r) => r.list_compact(query).await,
            Reader::Static(r) => r.list_compact(query).await,
            Reader::None => Err(ReadError::NoApi {
                what: describe(query),
            }),
        }
    }

    async fn readyz(&self) -> Result<String, ReadError> {
        match self {
            Reader::Kube(r) => r.readyz().await,
            Reader::Cached(r) => r.readyz().await,
            Reader::Static(r) => r.readyz().await,
            Reader::None => Err(ReadError::NoApi {
                what: "/readyz".into(),
            }),
        }
    }
    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<SecretData>, ReadError> {
        match self {
            Reader::Kube(r) => r.secret(namespace, name).await,
            Reader::Cached(r) => r.secret(namespace, name).await,
            Reader::Static(r) => r.secret(namespace, name).await,
            Reader::None => Err(ReadError::NoApi {
                what: format!("Secret {namespace}/{name}"),
            }),
        }
    }
}

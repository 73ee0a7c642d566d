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

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::Resource;
use kube::api::{Api, DynamicObject, GetParams, ListParams};
use kube::core::GroupVersionKind;
use serde_json::Value;

use fleetpulse_common::checks::query::Query;
use k8s_openapi::api::core::v1::Secret;

use super::probe::headers::SecretData;

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

/// Reads through a Kubernetes client.
#[derive(Clone)]
pub struct KubeReader {
    client: kube::Client,
    page_size: u32,
}

impl KubeReader {
    /// A reader over `client`, listing [`PAGE_SIZE`] objects per request.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            page_size: PAGE_SIZE,
        }
    }

    /// Lists `page_size` objects per request instead (at least 1).
    pub fn with_page_size(mut self, page_size: u32) -> Self {
        self.page_size = page_size.max(1);
        self
    }

    /// The client, for checks that write (pod checks).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }
}

/// Objects asked for per list request: a list is read a page at a time (`limit` and
/// `continue`, as client-go's pager does) so that only one page's response body is held at
/// once, not the whole collection's. 250 Pods of a typical workload are about 1 MB of JSON.
pub const PAGE_SIZE: u32 = 250;

/// One page of a list response. Items are read straight into JSON values (no
/// `DynamicObject` and copy of it), each trimmed as it is read.
#[derive(serde::Deserialize)]
struct Page {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default, deserialize_with = "items")]
    items: Vec<Value>,
}

/// `items` (which may be `null`), every object without `metadata.managedFields`: often the
/// largest part of an object and of no use to a health check (dropping it roughly halves
/// the Lua conversion cost of typical objects). Dropped as each object is read, so a page
/// never holds them all.
fn items<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Value>, D::Error> {
    struct Items;
    impl<'de> serde::de::Visitor<'de> for Items {
        type Value = Vec<Value>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of objects or null")
        }
        fn visit_unit<E>(self) -> Result<Vec<Value>, E> {
            Ok(Vec::new())
        }
        fn visit_none<E>(self) -> Result<Vec<Value>, E> {
            Ok(Vec::new())
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<Value>, D::Error> {
            d.deserialize_seq(self)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Vec<Value>, A::Error> {
            let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
            while let Some(mut item) = seq.next_element::<Value>()? {
                drop_managed_fields(&mut item);
                items.push(item);
            }
            Ok(items)
        }
    }
    d.deserialize_option(Items)
}

fn drop_managed_fields(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
}

/// An object as a check sees it: apiVersion and kind from the query (list items often omit
/// them), no managedFields; `None` if it is not an object or `query` does not select it.
fn as_checked(query: &Query, mut object: Value) -> Option<Value> {
    drop_managed_fields(&mut object);
    let map = object.as_object_mut()?;
    map.insert("apiVersion".into(), Value::String(query.api_version()));
    map.insert("kind".into(), Value::String(query.kind.clone()));
    query.matches(&object).then_some(object)
}

impl KubeReader {
    /// The collection under `url_path`, a page at a time, the objects `query` selects.
    async fn list_paged(&self, url_path: &str, query: &Query) -> Result<Vec<Value>, kube::Error> {
        let request = kube::core::Request::new(url_path);
        let mut selected = Vec::new();
        let mut params = ListParams::default().limit(self.page_size);
        loop {
            let mut http = request.list(&params).map_err(kube::Error::BuildRequest)?;
            http.extensions_mut().insert("list");
            let page: Page = match self.client.request(http).await {
                Ok(page) => page,
                // The continue token expired (410 Gone, the list took longer than the API
                // server keeps it): as client-go's pager does, list the collection whole.
                Err(kube::Error::Api(e)) if e.code == 410 && params.continue_token.is_some() => {
                    selected.clear();
                    params = ListParams::default();
                    continue;
                }
                Err(e) => return Err(e),
            };
            selected.extend(page.items.into_iter().filter_map(|o| as_checked(query, o)));
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) if params.limit.is_some() => params = params.continue_token(&token),
                _ => return Ok(selected),
            }
        }
    }

    /// Object `name` under `url_path`, `None` when there is none.
    async fn get_opt(&self, url_path: &str, name: &str) -> Result<Option<Value>, kube::Error> {
        let mut http = kube::core::Request::new(url_path)
            .get(name, &GetParams::default())
            .map_err(kube::Error::BuildRequest)?;
        http.extensions_mut().insert("get");
        match self.client.request::<Value>(http).await {
            Ok(object) => Ok(Some(object)),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl ResourceReader for KubeReader {
    async fn list(&self, query: &Query) -> Result<Vec<Value>, ReadError> {
        let what = describe(query);
        let gvk = GroupVersionKind::gvk(&query.group, &query.version, &query.kind);
        let resource = match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok((resource, _)) => resource,
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Vec::new()),
            Err(kube::Error::Discovery(_)) => return Ok(Vec::new()),
            Err(source) => return Err(ReadError::Api { what, source }),
        };
        let url_path = DynamicObject::url_path(&resource, query.namespace.as_deref());
        match &query.name {
            Some(name) => (self.get_opt(&url_path, name).await)
                .map(|o| o.and_then(|o| as_checked(query, o)).into_iter().collect()),
            None => self.list_paged(&url_path, query).await,
        }
        .map_err(|source| ReadError::Api { what, source })
    }

    async fn readyz(&self) -> Result<String, ReadError> {
        let request = http::Request::get("/readyz")
            .body(Vec::new())
            .expect("a static request is valid");
        self.client
            .request_text(request)
            .await
            .map_err(|source| ReadError::Api {
                what: "/readyz".into(),
                source,
            })
    }
    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<SecretData>, ReadError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret = api.get_opt(name).await.map_err(|source| ReadError::Api {
            what: format!("Secret {namespace}/{name}"),
            source,
        })?;
        Ok(secret.map(secret_data))
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
            Reader::Static(r) => r.list(query).await,
            Reader::None => Err(ReadError::NoApi {
                what: describe(query),
            }),
        }
    }

    async fn readyz(&self) -> Result<String, ReadError> {
        match self {
            Reader::Kube(r) => r.readyz().await,
            Reader::Static(r) => r.readyz().await,
            Reader::None => Err(ReadError::NoApi {
                what: "/readyz".into(),
            }),
        }
    }
    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<SecretData>, ReadError> {
        match self {
            Reader::Kube(r) => r.secret(namespace, name).await,
            Reader::Static(r) => r.secret(namespace, name).await,
            Reader::None => Err(ReadError::NoApi {
                what: format!("Secret {namespace}/{name}"),
            }),
        }
    }
}

//! [`KubeReader`]: objects read from the cluster's API server (discovery plus the dynamic
//! API), a page at a time. Each listed object is parsed alone, selected, and then kept as
//! the caller asks: as a JSON value, or as compact JSON text for a Lua round, so that a
//! listing is never held as values at once.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::Resource;
use kube::api::{Api, DynamicObject, GetParams, ListParams};
use kube::core::GroupVersionKind;
use serde_json::Value;
use serde_json::value::RawValue;

use fleetpulse_common::checks::query::Query;
use fleetpulse_common::compact::{CompactObject, drop_managed_fields};

use super::{ReadError, ResourceReader, SecretData, describe, secret_data};

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

/// One page of a list response, its items left as slices of the response's text: each is
/// parsed on its own (no `DynamicObject` and copy of it, no page of values).
#[derive(serde::Deserialize)]
struct Page<'a> {
    #[serde(default)]
    metadata: ListMeta,
    /// `items` (which may be `null`).
    #[serde(default, borrow)]
    items: Option<Vec<&'a RawValue>>,
}

/// An object as a check sees it: apiVersion and kind from the query (list items often omit
/// them), no managedFields (often the largest part of an object and of no use to a health
/// check); `None` if it is not an object or `query` does not select it.
fn as_checked(query: &Query, mut object: Value) -> Option<Value> {
    drop_managed_fields(&mut object);
    let map = object.as_object_mut()?;
    map.insert("apiVersion".into(), Value::String(query.api_version()));
    map.insert("kind".into(), Value::String(query.kind.clone()));
    query.matches(&object).then_some(object)
}

impl KubeReader {
    /// The objects `query` selects, each made into a `T` by `keep` as soon as it is read.
    async fn list_as<T>(&self, query: &Query, keep: fn(Value) -> T) -> Result<Vec<T>, ReadError> {
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
            Some(name) => (self.get_opt(&url_path, name).await).map(|o| {
                (o.and_then(|o| as_checked(query, o)).map(keep))
                    .into_iter()
                    .collect()
            }),
            None => self.list_paged(&url_path, query, keep).await,
        }
        .map_err(|source| ReadError::Api { what, source })
    }

    /// The collection under `url_path`, a page at a time, the objects `query` selects.
    async fn list_paged<T>(
        &self,
        url_path: &str,
        query: &Query,
        keep: fn(Value) -> T,
    ) -> Result<Vec<T>, kube::Error> {
        let request = kube::core::Request::new(url_path);
        let mut selected = Vec::new();
        let mut params = ListParams::default().limit(self.page_size);
        loop {
            let mut http = request.list(&params).map_err(kube::Error::BuildRequest)?;
            http.extensions_mut().insert("list");
            let text = match self.client.request_text(http).await {
                Ok(text) => text,
                // The continue token expired (410 Gone, the list took longer than the API
                // server keeps it): as client-go's pager does, list the collection whole.
                Err(kube::Error::Api(e)) if e.code == 410 && params.continue_token.is_some() => {
                    selected.clear();
                    params = ListParams::default();
                    continue;
                }
                Err(e) => return Err(e),
            };
            let page: Page = serde_json::from_str(&text).map_err(kube::Error::SerdeError)?;
            for item in page.items.into_iter().flatten() {
                let object = serde_json::from_str(item.get()).map_err(kube::Error::SerdeError)?;
                selected.extend(as_checked(query, object).map(keep));
            }
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
        self.list_as(query, |object| object).await
    }

    async fn list_compact(&self, query: &Query) -> Result<Vec<CompactObject>, ReadError> {
        self.list_as(query, CompactObject::from).await
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

//! [`CachedReader`]: what the check engine reads through when it has a Kubernetes API. Lua
//! rounds and the ready-nodes and ready-pods built-ins read their objects from the
//! [`WatchCache`] (watched, not listed each round); everything else (Secrets, `/readyz`)
//! goes to the API server through the [`KubeReader`], as does a query no cache holds.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use fleetpulse_common::checks::lua_batch::{Batch, LuaCheck};
use fleetpulse_common::checks::query::Query;
use fleetpulse_common::compact::CompactObject;

use super::cache::{CacheKey, CacheOptions, WatchCache};
use super::{KubeReader, ReadError, ResourceReader, SecretData};

/// A [`KubeReader`] with watch-fed caches for Lua checks; clones share the caches.
#[derive(Clone)]
pub struct CachedReader {
    kube: KubeReader,
    cache: WatchCache,
}

impl CachedReader {
    /// Caches over `kube`'s client; every watch stops when `shutdown` is cancelled.
    pub fn new(
        kube: KubeReader,
        options: CacheOptions,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> Self {
        let cache = WatchCache::new(kube.client().clone(), options, shutdown);
        CachedReader { kube, cache }
    }

    /// The caches.
    pub fn cache(&self) -> &WatchCache {
        &self.cache
    }

    /// The client, for checks that write (pod checks).
    pub fn client(&self) -> &kube::Client {
        self.kube.client()
    }

    /// Watches exactly what `checks` select on the cluster with metadata `cluster` (their
    /// selectors resolved as a round resolves them) and what `built_ins` read, and stops
    /// every other watch.
    pub fn watch_for(&self, checks: Vec<Arc<LuaCheck>>, built_ins: &[Query], cluster: &ObjectMeta) {
        let batch = Batch::plan(checks, cluster);
        let keys = (batch.queries().iter().chain(built_ins))
            .filter(|q| !q.from_hub)
            .map(CacheKey::of);
        self.cache.retain(keys);
    }
}

impl ResourceReader for CachedReader {
    async fn list(&self, query: &Query) -> Result<Vec<Value>, ReadError> {
        self.kube.list(query).await
    }

    async fn list_compact(&self, query: &Query) -> Result<Vec<CompactObject>, ReadError> {
        match self.cache.read(query).await {
            Some(read) => read,
            None => self.kube.list_compact(query).await,
        }
    }

    async fn readyz(&self) -> Result<String, ReadError> {
        self.kube.readyz().await
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<SecretData>, ReadError> {
        self.kube.secret(namespace, name).await
    }
}

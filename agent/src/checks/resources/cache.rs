//! [`WatchCache`]: the objects Lua checks select, kept by watching instead of listed every
//! round. One watch-fed cache per [`CacheKey`] (kind, namespace scope, label selector),
//! shared by every check that selects it: it lists once, then watches ([`watch`]), and
//! holds each object as compact text ([`KindStore`]). The engine says which keys its checks
//! select ([`WatchCache::retain`]) whenever the config changes: a key no check selects
//! any more stops its watch, a new one starts. A read waits briefly for its key's first
//! list, then fails saying the cache is syncing: a check never passes on an empty list
//! it did not get.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch as channel;
use tokio_util::sync::CancellationToken;

use fleetpulse_common::checks::query::Query;
use fleetpulse_common::compact::CompactObject;

mod key;
mod watch;

pub use fleetpulse_common::checks::store::{Cached, Change, KindStore};
pub use key::{CacheKey, selector_string};

use super::ReadError;

/// Settings of a [`WatchCache`].
#[derive(Clone, Copy, Debug)]
pub struct CacheOptions {
    /// Objects per list request of a (re)list.
    pub page_size: u32,
    /// How long a read waits for its key's first list before it fails as syncing.
    pub sync_wait: Duration,
}

impl Default for CacheOptions {
    fn default() -> Self {
        Self {
            page_size: PAGE_SIZE,
            sync_wait: Duration::from_secs(3),
        }
    }
}

/// Objects per list request when a cache (re)lists: a page's objects are parsed at once
/// before each is made compact, so a small page keeps that brief peak small (100 Pods of
/// a typical workload are about 2 MiB as values), at one request per 100 objects, once.
pub const PAGE_SIZE: u32 = 100;

/// One key's cache: its objects, and the token that stops its watch.
struct KindCache {
    store: channel::Sender<KindStore>,
    stop: CancellationToken,
}

/// Watch-fed caches by key; clones share them.
#[derive(Clone)]
pub struct WatchCache {
    inner: Arc<Inner>,
}

struct Inner {
    client: kube::Client,
    kinds: Mutex<BTreeMap<CacheKey, KindCache>>,
    options: CacheOptions,
    /// Stops every watch (the agent's shutdown).
    shutdown: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for kind in self.kinds.get_mut().values() {
            kind.stop.cancel();
        }
    }
}

impl WatchCache {
    /// Caches over `client`; every watch stops when `shutdown` is cancelled (or the last
    /// clone is dropped).
    pub fn new(client: kube::Client, options: CacheOptions, shutdown: CancellationToken) -> Self {
        let inner = Inner {
            client,
            kinds: Mutex::new(BTreeMap::new()),
            options,
            shutdown,
        };
        WatchCache {
            inner: Arc::new(inner),
        }
    }

    /// Watches exactly `keys`: starts those not watched yet, stops the others.
    pub fn retain(&self, keys: impl IntoIterator<Item = CacheKey>) {
        let keys: BTreeSet<CacheKey> = keys.into_iter().collect();
        let mut kinds = self.inner.kinds.lock();
        kinds.retain(|key, kind| {
            let keep = keys.contains(key);
            if !keep {
                tracing::info!(cache = %key, "no check selects it any more: its watch stops");
                kind.stop.cancel();
            }
            keep
        });
        for key in keys {
            if let Entry::Vacant(vacant) = kinds.entry(key) {
                let kind = self.start(vacant.key().clone());
                vacant.insert(kind);
            }
        }
    }

    fn start(&self, key: CacheKey) -> KindCache {
        tracing::info!(cache = %key, "a check selects it: listing, then watching");
        let (store, _) = channel::channel(KindStore::default());
        let stop = self.inner.shutdown.child_token();
        let task = watch::run(
            self.inner.client.clone(),
            key,
            store.clone(),
            self.inner.options.page_size,
            stop.clone(),
        );
        tokio::spawn(task);
        KindCache { store, stop }
    }

    /// The keys watched now.
    pub fn keys(&self) -> Vec<CacheKey> {
        self.inner.kinds.lock().keys().cloned().collect()
    }

    /// How many objects the cache of `key` holds (`None`: `key` is not watched).
    pub fn held(&self, key: &CacheKey) -> Option<usize> {
        let kinds = self.inner.kinds.lock();
        kinds.get(key).map(|kind| kind.store.borrow().len())
    }

    /// The objects `query` selects, from its key's cache: `None` when no cache holds its
    /// key (no check of the config selects it). Waits up to the sync wait for the
    /// cache's first list, then fails as [`ReadError::Syncing`].
    pub async fn read(&self, query: &Query) -> Option<Result<Vec<CompactObject>, ReadError>> {
        let key = CacheKey::of(query);
        let mut synced = self.inner.kinds.lock().get(&key)?.store.subscribe();
        let wait = synced.wait_for(KindStore::is_synced);
        let _ = tokio::time::timeout(self.inner.options.sync_wait, wait).await;
        let store = synced.borrow();
        Some(if store.is_synced() {
            Ok(store.select(query))
        } else {
            Err(ReadError::Syncing {
                what: key.to_string(),
                last_error: store.last_error().map(str::to_owned),
            })
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;

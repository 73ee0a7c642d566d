//! The task that feeds one [`KindStore`]: discovery of the kind, then kube-runtime's
//! [`watcher`] (a paged list, then a watch with bookmarks from the list's
//! resourceVersion; it resumes a dropped watch from the last resourceVersion it saw,
//! relists on 410 Gone, and backs off on errors with kube-runtime's default backoff, built
//! on `backon`). Each event's object is made compact text as soon as it arrives, so no
//! object is held as a `serde_json::Value` past its event.

use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::{GroupVersionKind, TypeMeta};
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, DefaultBackoff, Event, ListSemantic};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use fleetpulse_common::compact::CompactObject;

use super::CacheKey;
use super::{Cached, Change, KindStore};

/// How often a kind the API server does not serve is looked up again (a CRD installed
/// later is then watched).
const NOT_SERVED_RECHECK: Duration = Duration::from_secs(60);

/// Watches `key` into `store` until `stop` is cancelled; lists `page_size` objects per
/// request.
pub(super) async fn run(
    client: kube::Client,
    key: CacheKey,
    store: watch::Sender<KindStore>,
    page_size: u32,
    stop: CancellationToken,
) {
    let gvk = GroupVersionKind::gvk(&key.group, &key.version, &key.kind);
    let mut retry = DefaultBackoff::default();
    loop {
        let discovered = tokio::select! {
            () = stop.cancelled() => return,
            found = kube::discovery::pinned_kind(&client, &gvk) => found,
        };
        let pause = match discovered {
            Ok((resource, caps)) => {
                retry = DefaultBackoff::default();
                let api = api(&client, &key, &resource, &caps);
                follow(api, &key, &store, page_size, &stop).await;
                if stop.is_cancelled() {
                    return;
                }
                Duration::ZERO
            }
            Err(kube::Error::Api(e)) if e.code == 404 => not_served(&store),
            Err(kube::Error::Discovery(_)) => not_served(&store),
            Err(e) => {
                let error = format!("discovering {key}: {e}");
                tracing::debug!(cache = %key, %error, "watch cache discovery failed");
                store.send_modify(|s| s.failed(error));
                retry.next().unwrap_or(NOT_SERVED_RECHECK)
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}

fn not_served(store: &watch::Sender<KindStore>) -> Duration {
    store.send_if_modified(|s| {
        let was = s.is_synced();
        s.not_served();
        !was
    });
    NOT_SERVED_RECHECK
}

/// The API of `key`'s objects: in its namespace, or all (a cluster-scoped kind is always
/// listed whole; a query's namespace then selects none of its objects).
fn api(
    client: &kube::Client,
    key: &CacheKey,
    resource: &ApiResource,
    caps: &ApiCapabilities,
) -> Api<DynamicObject> {
    match (&key.namespace, &caps.scope) {
        (Some(ns), Scope::Namespaced) => Api::namespaced_with(client.clone(), ns, resource),
        _ => Api::all_with(client.clone(), resource),
    }
}

/// Follows the watcher's events into `store` until `stop` is cancelled (the watcher's
/// stream itself never ends: it retries).
async fn follow(
    api: Api<DynamicObject>,
    key: &CacheKey,
    store: &watch::Sender<KindStore>,
    page_size: u32,
    stop: &CancellationToken,
) {
    // A consistent list, a page at a time: `resourceVersion=0` (any semantic) lets an API
    // server answer from its cache, whole, ignoring the page size.
    let mut config = watcher::Config::default()
        .page_size(page_size)
        .list_semantic(ListSemantic::MostRecent);
    if !key.label_selector.is_empty() {
        config = config.labels(&key.label_selector);
    }
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => return,
            event = events.next() => event,
        };
        match event {
            Some(Ok(event)) => {
                let change = change(key, event);
                store.send_if_modified(|s| {
                    let was = s.is_synced();
                    s.apply(change);
                    !was && s.is_synced()
                });
            }
            Some(Err(e)) => {
                let error = format!("watching {key}: {e}");
                tracing::debug!(cache = %key, %error, "watch cache retries");
                store.send_modify(|s| s.failed(error));
            }
            None => return,
        }
    }
}

fn change(key: &CacheKey, event: Event<DynamicObject>) -> Change {
    match event {
        Event::Init => Change::Relist,
        Event::InitApply(o) => Change::Listed(cached(key, o)),
        Event::InitDone => Change::RelistDone,
        Event::Apply(o) => Change::Applied(cached(key, o)),
        Event::Delete(o) => Change::Deleted(cached(key, o)),
    }
}

/// `object` as the cache holds it: apiVersion and kind from the key (list items often
/// omit them), no managedFields, compact text.
fn cached(key: &CacheKey, mut object: DynamicObject) -> Cached {
    object.metadata.managed_fields = None;
    object.types = Some(TypeMeta {
        api_version: key.api_version(),
        kind: key.kind.clone(),
    });
    let meta = &object.metadata;
    let (namespace, name) = (meta.namespace.clone(), meta.name.clone());
    let (uid, resource_version) = (meta.uid.clone(), meta.resource_version.clone());
    let labels = meta.labels.clone().unwrap_or_default();
    let deleting = meta.deletion_timestamp.is_some();
    // Serializing a DynamicObject cannot fail: its maps have string keys.
    let value = serde_json::to_value(&object).unwrap_or_default();
    Cached {
        namespace: namespace.unwrap_or_default(),
        name: name.unwrap_or_default(),
        uid: uid.unwrap_or_default(),
        resource_version: resource_version.unwrap_or_default(),
        labels,
        deleting,
        object: CompactObject::from(value),
    }
}

//! [`WatchCache`] against the in-process Kubernetes API test server, through the real kube
//! client: one list then a watch, relist on 410 Gone, a dropped watch resumed without loss
//! or duplicates, a key that cannot list failing reads as syncing, labelSelector sent to
//! the server.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use fleetpulse_common::api::ResourceSelector;
use fleetpulse_common::checks::query::Query;
use fleetpulse_kubesim::{KubeSim, eventually};

use super::super::ReadError;
use super::{CacheKey, CacheOptions, WatchCache};

const DEADLINE: Duration = Duration::from_secs(20);

fn query(selector: Value) -> Query {
    let selector: ResourceSelector = serde_json::from_value(selector).unwrap();
    Query::resolve(&selector, &ObjectMeta::default()).unwrap()
}

fn pods_query() -> Query {
    query(json!({"version": "v1", "kind": "Pod"}))
}

fn cache(sim: &KubeSim, stop: &CancellationToken) -> WatchCache {
    let options = CacheOptions {
        page_size: 2,
        sync_wait: Duration::from_millis(200),
    };
    WatchCache::new(sim.client(), options, stop.clone())
}

/// Creates Pod `name` labelled `app` in namespace `default`.
pub(crate) async fn create_pod(sim: &KubeSim, name: &str, app: &str) {
    let pod = json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    Api::<Pod>::namespaced(sim.client(), "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await
        .unwrap();
}

async fn delete_pod(sim: &KubeSim, name: &str) {
    Api::<Pod>::namespaced(sim.client(), "default")
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

/// Names of the pods a read of `query` returns, in order (duplicates kept).
async fn read_names(cache: &WatchCache, query: &Query) -> Result<Vec<String>, ReadError> {
    let objects = cache
        .read(query)
        .await
        .expect("the query's key is watched")?;
    Ok(objects
        .iter()
        .map(|o| o.identity().metadata.name.unwrap_or_default().into_owned())
        .collect())
}

/// Waits until a read of `query` returns exactly `names`.
async fn until_names(cache: &WatchCache, query: &Query, names: &[&str]) {
    let seen = eventually(DEADLINE, || async {
        let read = read_names(cache, query).await.ok()?;
        (read == names).then_some(())
    })
    .await;
    let last = read_names(cache, query).await;
    assert!(
        seen.is_some(),
        "the cache never held {names:?}; last read: {last:?}"
    );
}

/// Requests with `verb` on pods since request `mark` of the ledger.
fn pod_requests(sim: &KubeSim, verb: &str, mark: usize) -> usize {
    let requests = sim.requests();
    (requests[mark..].iter())
        .filter(|r| r.resource == "pods" && r.verb == verb)
        .count()
}

#[tokio::test]
async fn one_list_and_one_watch_serve_every_later_read_and_its_changes() {
    let sim = KubeSim::new();
    for i in 0..5 {
        create_pod(&sim, &format!("p{i}"), "web").await;
    }
    let stop = CancellationToken::new();
    let cache = cache(&sim, &stop);
    let mark = sim.requests().len();
    cache.retain([CacheKey::of(&pods_query())]);
    until_names(&cache, &pods_query(), &["p0", "p1", "p2", "p3", "p4"]).await;
    // Five objects at two a page: three list requests, then one watch.
    assert_eq!(pod_requests(&sim, "list", mark), 3);
    for _ in 0..20 {
        assert_eq!(read_names(&cache, &pods_query()).await.unwrap().len(), 5);
    }
    create_pod(&sim, "p5", "web").await;
    delete_pod(&sim, "p0").await;
    until_names(&cache, &pods_query(), &["p1", "p2", "p3", "p4", "p5"]).await;
    assert_eq!(
        pod_requests(&sim, "list", mark),
        3,
        "reads never list again"
    );
    assert_eq!(pod_requests(&sim, "watch", mark), 1);
    assert_eq!(sim.open_watches(), 1);
    stop.cancel();
    let closed = eventually(DEADLINE, || async {
        (sim.open_watches() == 0).then_some(())
    });
    assert!(closed.await.is_some(), "shutdown ends the watch");
}

#[tokio::test]
async fn watch_history_expired_410_gone_relists_and_holds_the_changes_made_meanwhile() {
    let sim = KubeSim::new();
    for i in 0..3 {
        create_pod(&sim, &format!("p{i}"), "web").await;
    }
    let stop = CancellationToken::new();
    let cache = cache(&sim, &stop);
    let mark = sim.requests().len();
    cache.retain([CacheKey::of(&pods_query())]);
    until_names(&cache, &pods_query(), &["p0", "p1", "p2"]).await;
    let open = eventually(DEADLINE, || async {
        (sim.open_watches() == 1).then_some(())
    });
    assert!(open.await.is_some(), "the cache watches after its list");
    let lists = pod_requests(&sim, "list", mark);
    // The changes are made while no watch is open (an open stream would deliver them, and
    // the cache would resume from past the compaction without a 410), then the history
    // is compacted past them: the cache can only learn them by listing again.
    sim.refuse("pods", "watch", true);
    sim.close_watches();
    let closed = eventually(DEADLINE, || async {
        (sim.open_watches() == 0).then_some(())
    });
    assert!(closed.await.is_some(), "the watch stream ends");
    create_pod(&sim, "p3", "web").await;
    delete_pod(&sim, "p1").await;
    sim.expire_watch_history();
    sim.refuse("pods", "watch", false);
    until_names(&cache, &pods_query(), &["p0", "p2", "p3"]).await;
    assert!(
        pod_requests(&sim, "list", mark) > lists,
        "resuming from an expired resourceVersion gets 410 Gone: the cache lists again"
    );
    stop.cancel();
}

#[tokio::test]
async fn a_dropped_watch_resumes_without_relisting_losing_or_duplicating_objects() {
    let sim = KubeSim::new();
    for i in 0..4 {
        create_pod(&sim, &format!("p{i}"), "web").await;
    }
    let stop = CancellationToken::new();
    let cache = cache(&sim, &stop);
    let mark = sim.requests().len();
    cache.retain([CacheKey::of(&pods_query())]);
    until_names(&cache, &pods_query(), &["p0", "p1", "p2", "p3"]).await;
    let lists = pod_requests(&sim, "list", mark);
    sim.close_watches();
    create_pod(&sim, "p4", "web").await;
    delete_pod(&sim, "p2").await;
    let patch = json!({"metadata": {"labels": {"changed": "yes"}}});
    Api::<Pod>::namespaced(sim.client(), "default")
        .patch("p0", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    until_names(&cache, &pods_query(), &["p0", "p1", "p3", "p4"]).await;
    let changed = query(json!({"version": "v1", "kind": "Pod",
        "labelFilters": [{"key": "changed", "operation": "Equal", "value": "yes"}]}));
    until_names(&cache, &changed, &["p0"]).await;
    let watches = eventually(DEADLINE, || async {
        (pod_requests(&sim, "watch", mark) >= 2).then_some(())
    });
    assert!(watches.await.is_some(), "the watch was opened again");
    assert_eq!(
        pod_requests(&sim, "list", mark),
        lists,
        "a resumed watch replays what it missed: no relist"
    );
    stop.cancel();
}

#[tokio::test]
async fn a_key_whose_list_fails_reads_as_syncing_naming_the_kind_until_it_lists() {
    let sim = KubeSim::new();
    create_pod(&sim, "p0", "web").await;
    sim.refuse("pods", "list", true);
    let stop = CancellationToken::new();
    let cache = cache(&sim, &stop);
    cache.retain([CacheKey::of(&pods_query())]);
    let failing = eventually(DEADLINE, || async {
        match cache.read(&pods_query()).await? {
            Err(e @ ReadError::Syncing { .. }) if e.to_string().contains("kubesim refuses") => {
                Some(e.to_string())
            }
            _ => None,
        }
    })
    .await
    .expect("reads fail as syncing, with the list's error");
    assert!(
        failing.contains("cache of v1/Pod in all namespaces has not synced yet"),
        "{failing}"
    );
    sim.refuse("pods", "list", false);
    until_names(&cache, &pods_query(), &["p0"]).await;
    stop.cancel();
}

#[tokio::test]
async fn the_label_selector_is_sent_to_the_server_and_the_cache_holds_only_matches() {
    let sim = KubeSim::new();
    create_pod(&sim, "web-1", "web").await;
    create_pod(&sim, "db-1", "db").await;
    create_pod(&sim, "web-2", "web").await;
    let stop = CancellationToken::new();
    let cache = cache(&sim, &stop);
    let web = query(json!({"version": "v1", "kind": "Pod", "selector": "app=web"}));
    let key = CacheKey::of(&web);
    assert_eq!(key.label_selector, "app=web");
    cache.retain([key.clone()]);
    until_names(&cache, &web, &["web-1", "web-2"]).await;
    assert_eq!(
        cache.held(&key),
        Some(2),
        "the server sent only matching pods"
    );
    create_pod(&sim, "db-2", "db").await;
    create_pod(&sim, "web-3", "web").await;
    until_names(&cache, &web, &["web-1", "web-2", "web-3"]).await;
    assert_eq!(cache.held(&key), Some(3));
    stop.cancel();
}

#[tokio::test]
async fn a_kind_the_cluster_does_not_serve_reads_as_no_objects() {
    let sim = KubeSim::new();
    let stop = CancellationToken::new();
    let cache = cache(&sim, &stop);
    let metrics =
        query(json!({"group": "metrics.keptn.sh", "version": "v1", "kind": "KeptnMetric"}));
    cache.retain([CacheKey::of(&metrics)]);
    let read = eventually(DEADLINE, || async { cache.read(&metrics).await?.ok() }).await;
    assert_eq!(read.map(|objects| objects.len()), Some(0));
    assert_eq!(sim.open_watches(), 0);
    stop.cancel();
}

#[tokio::test]
async fn retain_stops_the_watch_of_a_key_no_check_selects_any_more() {
    let sim = KubeSim::new();
    create_pod(&sim, "p0", "web").await;
    let stop = CancellationToken::new();
    let cache = cache(&sim, &stop);
    cache.retain([CacheKey::of(&pods_query())]);
    until_names(&cache, &pods_query(), &["p0"]).await;
    assert_eq!(sim.open_watches(), 1);
    cache.retain([]);
    assert!(cache.keys().is_empty());
    assert!(
        cache.read(&pods_query()).await.is_none(),
        "no cache holds the key"
    );
    let closed = eventually(DEADLINE, || async {
        (sim.open_watches() == 0).then_some(())
    });
    assert!(closed.await.is_some(), "the watch ends");
    stop.cancel();
}

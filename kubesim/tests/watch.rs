//! `kube::runtime::watcher` against kubesim: initial list, live events, and recovery after
//! the watch history expires (410 Gone).

use fleetpulse_kubesim::KubeSim;
use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
    runtime::watcher::{self, Event},
};
use serde_json::json;
use std::time::Duration;

type Events = BoxStream<'static, Result<Event<ConfigMap>, watcher::Error>>;

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn next(events: &mut Events) -> Result<Event<ConfigMap>, watcher::Error> {
    tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("watch event within 5s")
        .expect("watch stream does not end")
}

/// Reads events until the initial listing is done; returns the names listed.
async fn init_names(events: &mut Events) -> Vec<String> {
    let mut names = Vec::new();
    loop {
        match next(events).await {
            Ok(Event::Init) => names.clear(),
            Ok(Event::InitApply(o)) => names.push(o.name_any()),
            Ok(Event::InitDone) => return names,
            other => panic!("unexpected during init: {other:?}"),
        }
    }
}

#[tokio::test]
async fn watcher_sees_init_then_added_modified_deleted() {
    let sim = KubeSim::new();
    let api: Api<ConfigMap> = Api::default_namespaced(sim.client());
    api.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    let mut events: Events = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    assert_eq!(init_names(&mut events).await, ["before"]);

    api.create(&PostParams::default(), &cm("live"))
        .await
        .unwrap();
    let Ok(Event::Apply(added)) = next(&mut events).await else {
        panic!("expected Apply")
    };
    assert_eq!(added.name_any(), "live");

    let data = json!({"data": {"k": "v"}});
    api.patch("live", &PatchParams::default(), &Patch::Merge(&data))
        .await
        .unwrap();
    let Ok(Event::Apply(modified)) = next(&mut events).await else {
        panic!("expected Apply")
    };
    assert_eq!(modified.data.unwrap()["k"], "v");

    api.delete("live", &DeleteParams::default()).await.unwrap();
    let Ok(Event::Delete(deleted)) = next(&mut events).await else {
        panic!("expected Delete")
    };
    assert_eq!(deleted.name_any(), "live");
}

#[tokio::test]
async fn watcher_relists_after_410_gone() {
    let sim = KubeSim::new();
    let api: Api<ConfigMap> = Api::default_namespaced(sim.client());
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let mut events: Events = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    assert_eq!(init_names(&mut events).await, ["a"]);

    sim.expire_watch_history();
    let err = match next(&mut events).await {
        Err(watcher::Error::WatchError(status)) => status,
        other => panic!("expected a 410 watch error, got {other:?}"),
    };
    assert_eq!(err.code, 410);
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    let names = init_names(&mut events).await;
    assert!(names.contains(&"a".to_string()), "{names:?}");
}

#[tokio::test]
async fn streaming_list_watch_ends_initial_events_with_bookmark() {
    let sim = KubeSim::new();
    let api: Api<ConfigMap> = Api::default_namespaced(sim.client());
    api.create(&PostParams::default(), &cm("s")).await.unwrap();
    let cfg = watcher::Config::default().streaming_lists();
    let mut events: Events = watcher::watcher(api.clone(), cfg).boxed();
    assert_eq!(init_names(&mut events).await, ["s"]);
    api.create(&PostParams::default(), &cm("t")).await.unwrap();
    let Ok(Event::Apply(added)) = next(&mut events).await else {
        panic!("expected Apply")
    };
    assert_eq!(added.name_any(), "t");
}

#[tokio::test]
async fn raw_watch_from_expired_version_gets_410_error_event() {
    let sim = KubeSim::new();
    let api: Api<ConfigMap> = Api::default_namespaced(sim.client());
    let created = api.create(&PostParams::default(), &cm("x")).await.unwrap();
    let rv = created.resource_version().unwrap();
    sim.expire_watch_history();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap();
    match first {
        Some(Ok(WatchEvent::Error(status))) => assert_eq!(status.code, 410),
        other => panic!("expected ERROR 410, got {other:?}"),
    }
}

#[tokio::test]
async fn raw_watch_honours_label_selector_and_timeout() {
    let sim = KubeSim::new();
    let api: Api<ConfigMap> = Api::default_namespaced(sim.client());
    let wp = WatchParams::default().labels("team=a").timeout(1);
    let mut stream = api.watch(&wp, "0").await.unwrap().boxed();
    let mut other = cm("other");
    other.metadata.labels = Some([("team".to_string(), "b".to_string())].into());
    api.create(&PostParams::default(), &other).await.unwrap();
    let mut mine = cm("mine");
    mine.metadata.labels = Some([("team".to_string(), "a".to_string())].into());
    api.create(&PostParams::default(), &mine).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap();
    match first {
        Some(Ok(WatchEvent::Added(o))) => assert_eq!(o.name_any(), "mine"),
        other => panic!("expected ADDED mine, got {other:?}"),
    }
    // After timeoutSeconds the server sends a closing bookmark (bookmarks are allowed by
    // default) and ends the stream.
    let rest = tokio::time::timeout(Duration::from_secs(5), stream.collect::<Vec<_>>())
        .await
        .expect("stream ends after timeoutSeconds");
    assert!(
        rest.iter()
            .all(|e| matches!(e, Ok(WatchEvent::Bookmark(_)))),
        "{rest:?}"
    );
}

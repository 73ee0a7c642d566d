//! [`KindStore`] applied change by change, with no API server.

use serde_json::json;

use crate::checks::labels::LabelQuery;
use crate::checks::query::Query;
use crate::compact::CompactObject;

use super::{Cached, Change, KindStore};

fn pod(name: &str, uid: &str, rv: &str, app: &str) -> Cached {
    let object = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid, "resourceVersion": rv,
                     "labels": {"app": app}}});
    Cached {
        namespace: "default".into(),
        name: name.into(),
        uid: uid.into(),
        resource_version: rv.into(),
        labels: [("app".to_owned(), app.to_owned())].into(),
        deleting: false,
        object: CompactObject::from(object),
    }
}

fn all_pods() -> Query {
    Query {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        namespace: None,
        name: None,
        labels: LabelQuery::default(),
        filters: Vec::new(),
        identifier: None,
        from_hub: false,
        evaluate: None,
        evaluate_cel: Vec::new(),
    }
}

fn names(store: &KindStore, query: &Query) -> Vec<String> {
    store
        .select(query)
        .iter()
        .map(|o| o.identity().metadata.name.unwrap_or_default().into_owned())
        .collect()
}

fn listed(objects: Vec<Cached>) -> KindStore {
    let mut store = KindStore::default();
    store.apply(Change::Relist);
    for o in objects {
        store.apply(Change::Listed(o));
    }
    store.apply(Change::RelistDone);
    store
}

#[test]
fn store_is_unsynced_until_its_first_list_completes() {
    let mut store = KindStore::default();
    store.apply(Change::Relist);
    store.apply(Change::Listed(pod("a", "u1", "1", "web")));
    assert!(!store.is_synced());
    store.apply(Change::RelistDone);
    assert!(store.is_synced());
    assert_eq!(names(&store, &all_pods()), ["a"]);
}

#[test]
fn a_relist_replaces_the_objects_only_when_complete() {
    let mut store = listed(vec![pod("a", "u1", "1", "web"), pod("b", "u2", "2", "web")]);
    store.apply(Change::Relist);
    store.apply(Change::Listed(pod("c", "u3", "5", "web")));
    assert_eq!(
        names(&store, &all_pods()),
        ["a", "b"],
        "reads see the old list meanwhile"
    );
    store.apply(Change::RelistDone);
    assert_eq!(names(&store, &all_pods()), ["c"]);
}

#[test]
fn replayed_events_neither_duplicate_nor_resurrect_objects() {
    let mut store = listed(vec![pod("a", "u1", "1", "web")]);
    store.apply(Change::Applied(pod("a", "u1", "1", "web")));
    store.apply(Change::Applied(pod("b", "u2", "3", "web")));
    store.apply(Change::Applied(pod("b", "u2", "3", "web")));
    assert_eq!(names(&store, &all_pods()), ["a", "b"]);
    store.apply(Change::Deleted(pod("a", "u1", "4", "web")));
    store.apply(Change::Deleted(pod("a", "u1", "4", "web")));
    assert_eq!(names(&store, &all_pods()), ["b"]);
}

#[test]
fn deleting_an_older_uid_keeps_the_object_made_again_under_its_name() {
    let mut store = listed(vec![pod("a", "u1", "1", "web")]);
    store.apply(Change::Applied(pod("a", "u9", "7", "web")));
    store.apply(Change::Deleted(pod("a", "u1", "6", "web")));
    assert_eq!(store.len(), 1);
    let held = store.select(&all_pods());
    assert!(held[0].text().contains("\"u9\""), "{}", held[0].text());
}

#[test]
fn select_applies_name_labels_filters_and_skips_objects_being_deleted() {
    let mut deleting = pod("c", "u3", "3", "web");
    deleting.deleting = true;
    let store = listed(vec![
        pod("a", "u1", "1", "web"),
        pod("b", "u2", "2", "db"),
        deleting,
    ]);
    let mut query = all_pods();
    query.labels = LabelQuery::parse("app=web").unwrap();
    assert_eq!(names(&store, &query), ["a"]);
    query.labels = LabelQuery::default();
    query.name = Some("b".into());
    assert_eq!(names(&store, &query), ["b"]);
    query.name = None;
    query.namespace = Some("other".into());
    assert!(names(&store, &query).is_empty());
}

#[test]
fn a_kind_not_served_reads_as_synced_and_empty_and_keeps_the_last_error_out() {
    let mut store = KindStore::default();
    store.failed("connection refused".into());
    assert_eq!(store.last_error(), Some("connection refused"));
    store.not_served();
    assert!(store.is_synced());
    assert!(store.select(&all_pods()).is_empty());
    assert_eq!(store.last_error(), None);
}

#[test]
fn an_unchanged_object_is_handed_out_as_the_same_text_across_reads_replays_and_relists() {
    let mut store = listed(vec![pod("a", "u1", "1", "web"), pod("b", "u2", "2", "web")]);
    let first = store.select(&all_pods());
    let again = store.select(&all_pods());
    assert!(first[0].same_text(&again[0]) && first[1].same_text(&again[1]));

    store.apply(Change::Applied(pod("a", "u1", "1", "web")));
    store.apply(Change::Applied(pod("b", "u2", "3", "web")));
    let after_events = store.select(&all_pods());
    assert!(
        first[0].same_text(&after_events[0]),
        "a replayed event changes nothing"
    );
    assert!(
        !first[1].same_text(&after_events[1]),
        "a new version is new text"
    );

    store.apply(Change::Relist);
    store.apply(Change::Listed(pod("a", "u1", "1", "web")));
    store.apply(Change::Listed(pod("b", "u2", "4", "web")));
    store.apply(Change::RelistDone);
    let relisted = store.select(&all_pods());
    assert!(
        relisted[0].same_text(&first[0]),
        "unchanged across the relist"
    );
    assert!(!relisted[1].same_text(&after_events[1]));
    assert!(relisted[1].text().contains(r#""resourceVersion":"4""#));
}

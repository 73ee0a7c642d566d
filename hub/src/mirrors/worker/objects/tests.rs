//! The worker's object store: the due index agrees with each object's time, objects in
//! flight stay out of it, and only touched clusters are published.

use std::collections::BTreeMap;
use std::time::Duration;

use fleetpulse_common::protocol::report::ClusterId;
use tokio::time::Instant;

use super::{Key, Objects, Slot};
use crate::mirrors::Entry;
use crate::mirrors::kind::MirrorKind;
use crate::mirrors::plan::{TaintPlan, Wanted};
use crate::mirrors::writer::Target;

fn cluster(name: &str) -> ClusterId {
    ClusterId {
        namespace: "fleet".into(),
        name: name.into(),
    }
}

fn entry(name: &str, label: &str) -> Entry {
    let target = Target {
        kind: MirrorKind::SveltosCluster,
        namespace: "fleet".into(),
        name: name.into(),
    };
    Entry {
        object: target.describe(),
        target: Some(target),
        wanted: Wanted {
            labels: BTreeMap::from([("fleetpulse.io/state".to_owned(), label.to_owned())]),
            taint: TaintPlan::NotManaged,
        },
        problem: None,
    }
}

fn key(c: &str, object: &str) -> Key {
    (
        cluster(c),
        Slot::Object(Target {
            kind: MirrorKind::SveltosCluster,
            namespace: "fleet".into(),
            name: object.into(),
        }),
    )
}

#[test]
fn the_next_wake_up_is_the_earliest_object_due_and_moves_when_it_is_rescheduled() {
    let mut objects = Objects::default();
    let now = Instant::now();
    for name in ["a", "b"] {
        objects.replace(&cluster(name), vec![entry(name, "healthy")]);
    }
    objects.schedule(&key("a", "a"), Some(now + Duration::from_secs(5)));
    objects.schedule(&key("b", "b"), Some(now + Duration::from_secs(9)));
    assert_eq!(objects.next_due(), Some(now + Duration::from_secs(5)));

    objects.schedule(&key("a", "a"), Some(now + Duration::from_secs(20)));
    assert_eq!(objects.next_due(), Some(now + Duration::from_secs(9)));
    objects.schedule(&key("b", "b"), None);
    assert_eq!(objects.next_due(), Some(now + Duration::from_secs(20)));
}

#[test]
fn objects_in_flight_leave_the_index_until_they_land_and_the_limit_holds() {
    let mut objects = Objects::default();
    let now = Instant::now();
    for name in ["a", "b", "c"] {
        objects.replace(&cluster(name), vec![entry(name, "healthy")]);
        objects.schedule(&key(name, name), Some(now));
    }
    let later = now + Duration::from_secs(60);
    objects.replace(&cluster("d"), vec![entry("d", "healthy")]);
    objects.schedule(&key("d", "d"), Some(later));

    let started = objects.start_due(now, 2);
    assert_eq!(started, vec![key("a", "a"), key("b", "b")]);
    // A wanted change while in flight keeps its time on the object, not in the index.
    objects.schedule(&key("a", "a"), Some(now));
    assert_eq!(objects.start_due(now, 8), vec![key("c", "c")]);
    assert_eq!(objects.next_due(), Some(later));

    objects.landed(&key("a", "a"));
    objects.schedule(&key("a", "a"), Some(now));
    assert_eq!(objects.next_due(), Some(now));
    objects.aborted(now);
    let mut again = objects.start_due(now, 8);
    again.sort();
    assert_eq!(again, vec![key("a", "a"), key("b", "b"), key("c", "c")]);
}

#[test]
fn replacing_a_clusters_objects_keeps_the_listed_ones_and_unschedules_the_rest() {
    let mut objects = Objects::default();
    let now = Instant::now();
    let c = cluster("a");
    objects.replace(&c, vec![entry("one", "healthy"), entry("two", "healthy")]);
    objects.schedule(&key("a", "two"), Some(now));
    objects.get_mut(&key("a", "one")).expect("listed").writes = 3;

    let changed = objects.replace(&c, vec![entry("one", "healthy"), entry("one", "unhealthy")]);
    assert_eq!(
        changed,
        vec![(key("a", "one"), true)],
        "the later entry of a slot listed twice wins"
    );
    assert_eq!(
        objects.next_due(),
        None,
        "a dropped object leaves the index"
    );
    let one = objects.get_mut(&key("a", "one")).expect("kept");
    assert_eq!(one.writes, 3, "a kept object keeps its state");
    assert_eq!(one.entry.wanted.labels["fleetpulse.io/state"], "unhealthy");
}

#[test]
fn only_clusters_touched_since_the_last_publish_are_published() {
    let mut objects = Objects::default();
    for name in ["a", "b", "c"] {
        objects.replace(&cluster(name), vec![entry(name, "healthy")]);
    }
    assert_eq!(objects.take_touched().len(), 3);
    assert!(objects.take_touched().is_empty());

    objects.schedule(&key("b", "b"), Some(Instant::now()));
    objects.forget(&cluster("c"));
    let mut touched: Vec<(String, bool)> = objects
        .take_touched()
        .into_iter()
        .map(|(c, o)| (c.name, o.is_some()))
        .collect();
    touched.sort();
    assert_eq!(touched, vec![("b".into(), true), ("c".into(), false)]);

    objects.touch_all();
    assert_eq!(objects.take_touched().len(), 2, "every cluster left, once");
}

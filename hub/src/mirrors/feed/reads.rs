//! A sync reads what changed since the last one, not the fleet: a fleet of clusters with a
//! mirror each, driven through heartbeats, the detector, object changes and set statuses
//! taken from another replica, counting the clusters each sync read and what the writer
//! was told.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use tokio::sync::mpsc;

use super::*;
use crate::fleet::{Objects, Settings, shared};
use crate::mirrors::{Command, settings::DefaultMirror};
use crate::testing;

const CLUSTERS: usize = 10;

/// `CLUSTERS` clusters, each mirrored by the `sveltoscluster` default.
fn fleet(clusters: usize, now: Instant) -> (Fleet, MirrorArgs) {
    let fleet = testing::fleet_in_memory(Settings::default());
    assert!(
        fleet
            .reload(objects(clusters), now, Timestamp::now())
            .is_empty()
    );
    let args = MirrorArgs {
        mirror_defaults: vec![DefaultMirror::parse("sveltoscluster").unwrap()],
        ..Default::default()
    };
    (fleet, args)
}

fn objects(clusters: usize) -> Objects {
    let clusters: Vec<_> = (1..=clusters)
        .map(|i| {
            let id = format!("fleet/edge-{i}");
            testing::cluster(&id).interval(10).grace(30).build()
        })
        .collect();
    Objects {
        member_clusters: shared(clusters),
        ..Default::default()
    }
}

/// `objects` with a ClusterSet `last` that wants one of the last two clusters and
/// tolerates nothing.
fn with_a_set_of_the_last(mut objects: Objects) -> Objects {
    let set: fleetpulse_common::api::ClusterSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet", "metadata": {"name": "last"},
        "spec": {"maxReplicas": 1, "failover": {"tolerationSeconds": 0},
                 "clusterRefs": [{"namespace": "fleet", "name": format!("edge-{}", CLUSTERS - 1)},
                                 {"namespace": "fleet", "name": format!("edge-{CLUSTERS}")}]}
    }))
    .unwrap();
    objects.cluster_sets = shared(vec![set]);
    objects
}

fn id(i: usize) -> ClusterId {
    ClusterId::new("fleet", format!("edge-{i}"))
}

/// A writer that only records what it is told.
fn writer() -> (MirrorsHandle, mpsc::UnboundedReceiver<Command>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let statuses = Default::default();
    (MirrorsHandle { tx, statuses }, rx)
}

/// The clusters the writer was told to observe or forget since the last call.
fn told(rx: &mut mpsc::UnboundedReceiver<Command>) -> (Vec<ClusterId>, Vec<ClusterId>) {
    let (mut observed, mut forgotten) = (Vec::new(), Vec::new());
    while let Ok(command) = rx.try_recv() {
        match command {
            Command::Observe { cluster, .. } => observed.push(cluster),
            Command::Forget(cluster) => forgotten.push(cluster),
            Command::Freeze(_) => {}
        }
    }
    (observed, forgotten)
}

fn accept(fleet: &Fleet, cluster: &ClusterId, seq: u64, now: Instant) {
    let entry = fleet.registry().cluster(cluster).cloned().unwrap();
    // Made with the config the hub serves, so the cluster can become Ready.
    let generation = fleet.config(&entry).generation;
    let report = testing::report(cluster)
        .seq(seq)
        .generation(generation)
        .build();
    (fleet.accept(&testing::admitted(entry, report), now, Timestamp::now())).unwrap();
}

/// A fleet that heard every cluster at `now` and all but the last again 40 s later, then
/// a detector tick at 41 s: only the last is past its 30 s grace period.
fn one_cluster_goes_quiet(fleet: &Fleet, feed: &mut Feed, args: &MirrorArgs, h: &MirrorsHandle) {
    let now = Instant::now();
    for i in 1..=CLUSTERS {
        accept(fleet, &id(i), 1, now);
    }
    feed.sync(fleet, args, h);
    for i in 1..CLUSTERS {
        accept(fleet, &id(i), 2, now + Duration::from_secs(40));
    }
    feed.sync(fleet, args, h);
    fleet.tick(now + Duration::from_secs(41), Timestamp::now());
}

#[test]
fn the_first_sync_reads_every_cluster_and_one_with_nothing_changed_reads_none() {
    let (fleet, args) = fleet(CLUSTERS, Instant::now());
    let (handle, mut rx) = writer();
    let mut feed = Feed::default();
    assert_eq!(feed.sync(&fleet, &args, &handle), CLUSTERS);
    assert_eq!(feed.sync(&fleet, &args, &handle), 0);
    assert_eq!(
        told(&mut rx),
        (vec![], vec![]),
        "no verdict yet: nothing told"
    );
}

#[test]
fn a_transition_makes_the_next_sync_read_that_cluster_alone() {
    let (fleet, args) = fleet(CLUSTERS, Instant::now() - Duration::from_secs(60));
    let (handle, mut rx) = writer();
    let mut feed = Feed::default();
    feed.sync(&fleet, &args, &handle);
    one_cluster_goes_quiet(&fleet, &mut feed, &args, &handle);
    told(&mut rx);
    assert_eq!(feed.sync(&fleet, &args, &handle), 1);
    assert_eq!(told(&mut rx), (vec![id(CLUSTERS)], vec![]));
    let input = &feed.told[&id(CLUSTERS)].input;
    assert!(!input.reachable && !input.healthy, "{input:?}");
}

#[test]
fn a_set_that_replaces_a_cluster_changes_two_mirrors_memberships_without_a_full_read() {
    let (fleet, args) = fleet(CLUSTERS, Instant::now() - Duration::from_secs(60));
    let objects = with_a_set_of_the_last(objects(CLUSTERS));
    assert!((fleet.reload(objects, Instant::now(), Timestamp::now())).is_empty());
    let (handle, mut rx) = writer();
    let mut feed = Feed::default();
    feed.sync(&fleet, &args, &handle);
    let now = Instant::now();
    // Two passing reports each: Healthy, so the set selects one of the last two.
    for i in 1..=CLUSTERS {
        accept(&fleet, &id(i), 1, now);
        accept(&fleet, &id(i), 2, now + Duration::from_secs(1));
    }
    feed.sync(&fleet, &args, &handle);
    let labelled = |feed: &Feed| -> Vec<ClusterId> {
        let mut ids: Vec<_> = (feed.told.iter())
            .filter(|(_, t)| !t.input.memberships.is_empty())
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    };
    let selected = labelled(&feed);
    assert_eq!(selected.len(), 1, "{selected:?}");
    let (quiet, other) = match selected[0] == id(CLUSTERS) {
        true => (id(CLUSTERS), id(CLUSTERS - 1)),
        false => (id(CLUSTERS - 1), id(CLUSTERS)),
    };
    for i in (1..=CLUSTERS).filter(|i| id(*i) != quiet) {
        accept(&fleet, &id(i), 3, now + Duration::from_secs(40));
    }
    feed.sync(&fleet, &args, &handle);
    told(&mut rx);
    fleet.tick(now + Duration::from_secs(41), Timestamp::now());
    assert_eq!(feed.sync(&fleet, &args, &handle), 2);
    let (mut observed, forgotten) = told(&mut rx);
    observed.sort();
    let mut both = vec![quiet.clone(), other.clone()];
    both.sort();
    assert_eq!((observed, forgotten), (both, vec![]));
    assert_eq!(labelled(&feed), vec![other]);
    assert!(!feed.told[&quiet].input.reachable);
}

#[test]
fn a_cluster_taken_out_of_the_manifests_is_forgotten_by_the_next_sync_alone() {
    let (fleet, args) = fleet(CLUSTERS, Instant::now() - Duration::from_secs(60));
    let (handle, mut rx) = writer();
    let mut feed = Feed::default();
    feed.sync(&fleet, &args, &handle);
    one_cluster_goes_quiet(&fleet, &mut feed, &args, &handle);
    feed.sync(&fleet, &args, &handle);
    told(&mut rx);
    let now = Instant::now();
    let fewer = objects(CLUSTERS - 1);
    assert!(fleet.reload(fewer, now, Timestamp::now()).is_empty());
    assert_eq!(feed.sync(&fleet, &args, &handle), 1);
    assert_eq!(told(&mut rx), (vec![], vec![id(CLUSTERS)]));
    assert!(!feed.told.contains_key(&id(CLUSTERS)));
}

#[test]
fn set_statuses_taken_from_another_replica_make_the_next_sync_read_every_cluster() {
    let (fleet, args) = fleet(CLUSTERS, Instant::now());
    let (handle, _rx) = writer();
    let mut feed = Feed::default();
    feed.sync(&fleet, &args, &handle);
    fleet.adopt_written_set_statuses();
    assert_eq!(feed.sync(&fleet, &args, &handle), CLUSTERS);
}

#[test]
fn the_feeds_syncs_are_counted_with_the_clusters_they_read() {
    let (fleet, args) = fleet(CLUSTERS, Instant::now());
    let (handle, _rx) = writer();
    let mut feed = Feed::default();
    let mut pace = Pace::default();
    for _ in 0..2 {
        let (read, took) = pace.timed(|| feed.sync(&fleet, &args, &handle));
        fleet.metrics().mirror_feed.record(read, took);
    }
    let text = Arc::new(fleet).encode_metrics();
    assert!(
        text.contains("fleetpulse_hub_mirror_feed_syncs_total 2"),
        "{text}"
    );
    let read = format!("fleetpulse_hub_mirror_feed_clusters_read_total {CLUSTERS}");
    assert!(text.contains(&read), "{text}");
}

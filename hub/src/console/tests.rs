//! The console's stream and its view of one cluster, over a fleet in memory fed reports
//! as the heartbeat path accepts them; and its routes: the page served with its policy,
//! an unknown cluster refused by name.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tower::ServiceExt;

use fleetpulse_common::api::{CheckKind, CheckPhase};
use fleetpulse_common::protocol::report::CheckResult;

use super::events::Feed;
use super::*;
use crate::fleet::{Objects, Settings, shared};
use crate::testing;

fn fleet() -> Arc<Fleet> {
    let fleet = testing::fleet_in_memory(Settings::default());
    let objects = Objects {
        member_clusters: shared(vec![
            testing::cluster("fleet/edge-1").interval(10).build(),
            testing::cluster("fleet/edge-2").interval(10).build(),
        ]),
        ..Default::default()
    };
    assert!(
        fleet
            .reload(objects, Instant::now(), Timestamp::now())
            .is_empty()
    );
    Arc::new(fleet)
}

fn nodes(passing: bool, message: &str) -> CheckResult {
    CheckResult {
        name: "nodes".into(),
        kind: CheckKind::ReadyNodes,
        phase: CheckPhase::Liveness,
        passing,
        message: message.into(),
        since: None,
        consecutive_failures: u32::from(!passing),
        success_rate_percent: None,
    }
}

fn accept(fleet: &Fleet, name: &str, seq: u64, wall: Timestamp, check: CheckResult) {
    let id = ClusterId::new("fleet", name);
    let entry = fleet.registry().cluster(&id).cloned().unwrap();
    let report = testing::report(&id)
        .seq(seq)
        .at(wall)
        .checks(vec![check])
        .build();
    let admitted = testing::admitted(entry, report);
    fleet.accept(&admitted, Instant::now(), wall).unwrap();
}

fn names(batch: &[(&'static str, String)]) -> Vec<&'static str> {
    batch.iter().map(|(name, _)| *name).collect()
}

fn data(batch: &[(&'static str, String)], name: &str) -> serde_json::Value {
    let (_, text) = batch.iter().find(|(n, _)| *n == name).unwrap();
    serde_json::from_str(text).unwrap()
}

#[test]
fn a_stream_sends_the_whole_fleet_first_then_only_the_rows_that_changed() {
    let fleet = fleet();
    let mut feed = Feed::new(fleet.clone());
    let first = feed.batch();
    assert_eq!(names(&first), ["fleet", "sets", "hub", "policies", "tick"]);
    let rows = data(&first, "fleet");
    assert_eq!(rows["full"], true);
    assert_eq!(rows["rows"].as_array().unwrap().len(), 2);

    assert_eq!(names(&feed.batch()), ["tick"], "nothing changed");

    accept(
        &fleet,
        "edge-1",
        1,
        Timestamp::now(),
        nodes(false, "2 of 3 nodes Ready"),
    );
    let changed = feed.batch();
    assert_eq!(names(&changed), ["fleet", "tick"]);
    let rows = data(&changed, "fleet");
    assert_eq!(rows["full"], false);
    let rows = rows["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"], "fleet/edge-1");
    assert_eq!(rows[0]["reachable"], "True");
    assert_eq!(rows[0]["failing"][0]["message"], "2 of 3 nodes Ready");
}

#[test]
fn a_cluster_in_full_has_its_check_changes_and_heartbeat_gaps() {
    let fleet = fleet();
    let start = Timestamp::now() - SignedDuration::from_secs(120);
    let at = |s: i64| start + SignedDuration::from_secs(s);
    accept(
        &fleet,
        "edge-1",
        1,
        at(0),
        nodes(true, "3 of 3 nodes Ready"),
    );
    accept(
        &fleet,
        "edge-1",
        2,
        at(10),
        nodes(true, "3 of 3 nodes Ready"),
    );
    // Silent for 40 s, four intervals: a gap; and the check failed meanwhile.
    accept(
        &fleet,
        "edge-1",
        3,
        at(50),
        nodes(false, "2 of 3 nodes Ready"),
    );

    let detail = fleet
        .cluster_detail(&ClusterId::new("fleet", "edge-1"))
        .unwrap();
    let history: Vec<(bool, &str)> = (detail.check_history.iter())
        .map(|c| (c.passing, c.message.as_str()))
        .collect();
    assert_eq!(
        history,
        [(true, "3 of 3 nodes Ready"), (false, "2 of 3 nodes Ready")]
    );
    assert_eq!(detail.gaps.len(), 1);
    assert_eq!(detail.gaps[0].from, at(10).as_millisecond());
    assert_eq!(detail.gaps[0].to, at(50).as_millisecond());
    assert_eq!(detail.row.failing[0].name, "nodes");
    assert!(
        fleet
            .cluster_detail(&ClusterId::new("fleet", "nope"))
            .is_none()
    );
}

/// Owns only `edge-1`'s shard, as a replica sharing the fleet would.
struct OwnsEdge1;

impl crate::fleet::Ownership for OwnsEdge1 {
    fn term(&self, cluster: &ClusterId) -> Option<u64> {
        (cluster.name == "edge-1").then_some(1)
    }
}

#[test]
fn a_replica_sharing_the_fleet_shows_every_cluster_and_which_it_judges() {
    let store = testing::MemoryStore::new();
    let fleet = Fleet::new(Settings::default(), crate::store::StoreWriter::spawn(store));
    let mut written = testing::cluster("fleet/edge-2").build();
    written.status = Some(fleetpulse_common::api::MemberClusterStatus {
        conditions: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: "Reachable".into(),
            status: "False".into(),
            reason: "HeartbeatMissed".into(),
            message: "written by the replica owning its shard".into(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::now(),
            ),
            observed_generation: None,
        }],
        ..Default::default()
    });
    let objects = Objects {
        member_clusters: shared(vec![testing::cluster("fleet/edge-1").build(), written]),
        ..Default::default()
    };
    fleet.use_ownership(Arc::new(OwnsEdge1));
    fleet.reload(objects, Instant::now(), Timestamp::now());
    let rows = fleet.fleet_rows();
    let owned: Vec<(&str, Option<bool>, &str)> = (rows.iter())
        .map(|r| (r.id.as_str(), r.owned, r.reachable))
        .collect();
    assert_eq!(
        owned,
        [
            ("fleet/edge-1", Some(true), "Unknown"),
            ("fleet/edge-2", Some(false), "False")
        ]
    );
    assert!(
        rows[1]
            .reason
            .contains("written by the replica owning its shard")
    );
}

async fn get(app: &axum::Router, path: &str) -> (StatusCode, String, Option<String>) {
    let request = Request::get(path).body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let policy =
        (response.headers().get("content-security-policy")).map(|v| v.to_str().unwrap().to_owned());
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned(), policy)
}

#[tokio::test]
async fn the_page_is_served_with_its_policy_and_an_unknown_cluster_is_refused_by_name() {
    let app = router(fleet(), CancellationToken::new());
    let (status, body, policy) = get(&app, "/console/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("/console/console.js"), "{body}");
    assert!(policy.unwrap().contains("script-src 'self'"));
    for asset in [
        "/console/console.js",
        "/console/pages.js",
        "/console/console.css",
    ] {
        assert!(is_asset(asset));
        assert_eq!(get(&app, asset).await.0, StatusCode::OK, "{asset}");
    }
    assert!(!is_asset("/v1/console/events"));

    let (status, body, _) = get(&app, "/v1/console/clusters/fleet/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("fleet/nope"), "{body}");
    let (status, body, _) = get(&app, "/v1/console/clusters/fleet/edge-1").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("\"id\":\"fleet/edge-1\""), "{body}");
}

#[tokio::test]
async fn a_stream_ends_when_the_hub_stops() {
    let stop = CancellationToken::new();
    let app = router(fleet(), stop.clone());
    let request = Request::get("/v1/console/events")
        .body(Body::empty())
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    stop.cancel();
    let body = axum::body::to_bytes(response.into_body(), 1 << 24);
    let body = tokio::time::timeout(Duration::from_secs(10), body).await;
    assert!(body.expect("the stream ended").is_ok());
}

//! The gate on an in-process router: owned shards pass, others are redirected to their
//! owner with the same path, unowned ones are `503`, and requests for no cluster pass.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::{get, post};
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::*;
use crate::ids::shard_of;
use crate::kubernetes::shard_leases::Owner;
use crate::shards::ShardSettings;

const SHARDS: u32 = 4;

fn settings() -> ShardSettings {
    ShardSettings {
        namespace: "fleet".into(),
        identity: "hub-a".into(),
        shards: SHARDS,
        duration: Duration::from_secs(15),
        url: Some("https://hub-a:8443".into()),
    }
}

/// A cluster name falling in shard `k`.
fn cluster_in(k: u32) -> String {
    (0..)
        .map(|i| format!("edge-{i}"))
        .find(|n| shard_of(&ClusterId::new("fleet", n), SHARDS) == k)
        .unwrap()
}

fn app(shards: Shards) -> Router {
    Router::new()
        .route(
            "/v1/clusters/{namespace}/{name}/heartbeat",
            post(|| async { "accepted" }),
        )
        .route("/readyz", get(|| async { "ok" }))
        .layer(axum::middleware::from_fn_with_state(shards, gate))
}

async fn send(app: &Router, method: &str, path: &str) -> (StatusCode, Option<String>, String) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .body(Body::from("jws"))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let location = (response.headers().get(LOCATION)).map(|v| v.to_str().unwrap().to_string());
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        location,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

#[tokio::test]
async fn heartbeats_of_owned_shards_pass_and_others_are_sent_to_their_owner() {
    let b = Owner {
        identity: "hub-b".into(),
        url: Some("https://hub-b:8443/".into()),
    };
    let app = app(Shards::fixed(&settings(), &[0, 1], &[(2, b)]));
    let owned = format!("/v1/clusters/fleet/{}/heartbeat", cluster_in(0));
    assert_eq!(send(&app, "POST", &owned).await.0, StatusCode::OK);

    let theirs = format!("/v1/clusters/fleet/{}/heartbeat", cluster_in(2));
    let (status, location, body) = send(&app, "POST", &theirs).await;
    assert_eq!(status, StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(location, Some(format!("https://hub-b:8443{theirs}")));
    assert!(
        body.contains("\"unavailable\"") && body.contains("owned by hub replica hub-b"),
        "{body}"
    );

    let nobodys = format!("/v1/clusters/fleet/{}/heartbeat", cluster_in(3));
    let (status, location, body) = send(&app, "POST", &nobodys).await;
    assert_eq!((status, location), (StatusCode::SERVICE_UNAVAILABLE, None));
    assert!(
        body.contains("which no hub replica owns right now"),
        "{body}"
    );

    assert_eq!(
        send(&app, "GET", "/readyz").await.0,
        StatusCode::OK,
        "probes pass"
    );
}

#[test]
fn only_paths_below_a_cluster_name_a_cluster() {
    assert_eq!(
        cluster_of("/v1/clusters/ns/c/heartbeat"),
        Some(ClusterId::new("ns", "c"))
    );
    assert_eq!(cluster_of("/v1/clusters/ns/c"), None);
    assert_eq!(cluster_of("/v1/clusters//c/heartbeat"), None);
    assert_eq!(cluster_of("/v1/enrol"), None);
}

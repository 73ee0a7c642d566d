//! The agent's client against hub replicas that share the fleet: a replica that does not
//! own the cluster's shard redirects to the one that does; the client follows once, sends
//! there directly from then on, and goes back to the configured hub when the owner
//! refuses. Each replica is a small axum server counting what reached it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, Uri, header::LOCATION};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::post;
use fleetpulse_agent::Url;
use fleetpulse_agent::hub_client::{HttpHubClient, HubClient, HubError};
use fleetpulse_common::protocol::report::{ClusterId, HeartbeatAnswer};
use serde_json::json;
use tokio::net::TcpListener;

const TIMEOUT: Duration = Duration::from_secs(5);

/// What a replica answers: `0` for an accepted heartbeat, else that status (a `307` to
/// `redirect_to`).
struct Replica {
    answer: AtomicU16,
    redirect_to: std::sync::Mutex<String>,
    hits: AtomicUsize,
    bodies: std::sync::Mutex<Vec<String>>,
}

async fn heartbeat(State(replica): State<Arc<Replica>>, uri: Uri, body: String) -> Response {
    replica.hits.fetch_add(1, Ordering::SeqCst);
    replica.bodies.lock().unwrap().push(body);
    let unavailable = json!({"code": "unavailable", "message": "not the owner"});
    match replica.answer.load(Ordering::SeqCst) {
        0 => Json(HeartbeatAnswer {
            incarnation: 1,
            accepted_seq: 1,
            config_generation: 0,
            interval_seconds: 10,
            rotate_key: false,
        })
        .into_response(),
        307 => {
            let to = format!("{}{}", replica.redirect_to.lock().unwrap(), uri.path());
            (
                StatusCode::TEMPORARY_REDIRECT,
                [(LOCATION, to)],
                Json(unavailable),
            )
                .into_response()
        }
        status => (StatusCode::from_u16(status).unwrap(), Json(unavailable)).into_response(),
    }
}

/// A replica answering `answer`, and its base URL.
async fn replica(answer: u16) -> (Arc<Replica>, String) {
    let replica = Arc::new(Replica {
        answer: AtomicU16::new(answer),
        redirect_to: std::sync::Mutex::new(String::new()),
        hits: AtomicUsize::new(0),
        bodies: std::sync::Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/v1/clusters/{namespace}/{name}/heartbeat", post(heartbeat))
        .with_state(replica.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (replica, url)
}

fn redirecting(from: &Replica, to: &str) {
    *from.redirect_to.lock().unwrap() = to.to_owned();
    from.answer.store(307, Ordering::SeqCst);
}

fn client(hub: &str) -> HttpHubClient {
    let hub = Url::parse(hub).unwrap();
    HttpHubClient::new(&hub, &ClusterId::new("team-a", "east-1"), None, true).unwrap()
}

fn hits(replica: &Replica) -> usize {
    replica.hits.load(Ordering::SeqCst)
}

#[tokio::test]
async fn a_redirect_is_followed_once_and_the_owner_kept_until_it_refuses() {
    let (service, service_url) = replica(0).await;
    let (owner, owner_url) = replica(0).await;
    redirecting(&service, &owner_url);
    let hub = client(&service_url);

    hub.send_heartbeat("jws-1".into(), TIMEOUT)
        .await
        .expect("sent on to the owner");
    assert_eq!((hits(&service), hits(&owner)), (1, 1));
    assert_eq!(
        *owner.bodies.lock().unwrap(),
        ["jws-1"],
        "the body went along"
    );

    for n in 2..=4 {
        hub.send_heartbeat(format!("jws-{n}"), TIMEOUT)
            .await
            .expect("to the owner");
    }
    assert_eq!(
        (hits(&service), hits(&owner)),
        (1, 4),
        "straight to the owner"
    );

    // The owner loses the shard: it answers 503 until it is gone; the client drops it.
    owner.answer.store(503, Ordering::SeqCst);
    let refused = hub.send_heartbeat("jws-5".into(), TIMEOUT).await;
    assert!(
        matches!(refused, Err(HubError::Rejected { status: 503, .. })),
        "{refused:?}"
    );
    service.answer.store(0, Ordering::SeqCst);
    hub.send_heartbeat("jws-6".into(), TIMEOUT)
        .await
        .expect("the configured hub");
    assert_eq!(
        (hits(&service), hits(&owner)),
        (2, 5),
        "back to the configured hub"
    );
}

#[tokio::test]
async fn an_owner_that_redirects_in_turn_hands_the_client_on() {
    let (service, service_url) = replica(0).await;
    let (old, old_url) = replica(0).await;
    let (new, new_url) = replica(0).await;
    redirecting(&service, &old_url);
    let hub = client(&service_url);
    hub.send_heartbeat("a".into(), TIMEOUT)
        .await
        .expect("to the old owner");

    // The shard moves: the old owner redirects to the new one, which is followed and kept.
    redirecting(&old, &new_url);
    hub.send_heartbeat("b".into(), TIMEOUT)
        .await
        .expect("to the new owner");
    hub.send_heartbeat("c".into(), TIMEOUT)
        .await
        .expect("to the new owner");
    assert_eq!((hits(&service), hits(&old), hits(&new)), (1, 2, 2));
}

#[tokio::test]
async fn an_unreachable_owner_is_dropped_for_the_configured_hub() {
    let (service, service_url) = replica(0).await;
    // An address nothing listens on: bind, note the port, close.
    let gone = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gone_url = format!("http://{}", gone.local_addr().unwrap());
    drop(gone);
    redirecting(&service, &gone_url);
    let hub = client(&service_url);
    let lost = hub.send_heartbeat("a".into(), TIMEOUT).await;
    assert!(
        matches!(lost, Err(HubError::Unreachable { .. })),
        "{lost:?}"
    );

    service.answer.store(0, Ordering::SeqCst);
    hub.send_heartbeat("b".into(), TIMEOUT)
        .await
        .expect("the configured hub");
    assert_eq!(hits(&service), 2, "the unreachable owner was not kept");
}

#[tokio::test]
async fn a_redirect_elsewhere_than_the_same_path_is_not_followed() {
    let (service, service_url) = replica(0).await;
    let (owner, owner_url) = replica(0).await;
    // A redirect to another cluster's path: not followed, the refusal returned.
    redirecting(
        &service,
        &format!("{owner_url}/v1/clusters/x/y/heartbeat?then="),
    );
    let hub = client(&service_url);
    let refused = hub.send_heartbeat("a".into(), TIMEOUT).await;
    assert!(
        matches!(refused, Err(HubError::Rejected { status: 307, .. })),
        "{refused:?}"
    );
    assert!(
        refused.unwrap_err().is_transient(),
        "retried like a standby's refusal"
    );
    assert_eq!((hits(&service), hits(&owner)), (1, 0));
}

//! The real HTTP client and loop against a tiny in-process axum hub on 127.0.0.1 (plain
//! HTTP, allowed with `allow_insecure_http`). The hub verifies every JWS like the real one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use ed25519_dalek::VerifyingKey;
use fleetpulse_common::protocol::errors::{ErrorBody, RejectCode};
use fleetpulse_common::protocol::report::{
    AgentConfig, ClusterId, ConfigRequest, HeartbeatAnswer, HeartbeatReport,
};
use fleetpulse_common::protocol::{
    AUTH_SCHEME, CONTENT_TYPE_JOSE, TYP_CONFIG_REQUEST, TYP_HEARTBEAT, jws, keys,
};

use crate::{AgentError, AgentHandle, AgentOptions, Url, spawn};

const DEADLINE: Duration = Duration::from_secs(20);

/// What the test hub has seen, and how it answers.
pub(super) struct Hub {
    key: VerifyingKey,
    /// Answer the first `unavailable_for` heartbeats with 503.
    unavailable_for: usize,
    /// The `Retry-After` of those 503s, if any.
    retry_after: Option<&'static str>,
    /// When each heartbeat arrived.
    arrivals: Vec<std::time::Instant>,
    /// The config generation announced in answers and served.
    generation: u64,
    pub(super) heartbeats: Vec<(HeartbeatReport, StatusCode)>,
    config_requests: Vec<ConfigRequest>,
}

pub(super) type Shared = Arc<Mutex<Hub>>;

fn unavailable(retry_after: Option<&'static str>) -> Response {
    let body = ErrorBody {
        code: RejectCode::Unavailable,
        message: "hub is starting".into(),
        last_accepted: None,
    };
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    if let Some(value) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static(value));
    }
    response
}

async fn heartbeat(State(hub): State<Shared>, headers: HeaderMap, body: String) -> Response {
    assert_eq!(headers[header::CONTENT_TYPE], CONTENT_TYPE_JOSE);
    let mut hub = hub.lock().unwrap();
    let payload = jws::parse(&body, TYP_HEARTBEAT)
        .unwrap()
        .verify(&hub.key)
        .unwrap();
    let report: HeartbeatReport = serde_json::from_slice(&payload).unwrap();
    report.validate().unwrap();
    hub.arrivals.push(std::time::Instant::now());
    if hub.heartbeats.len() < hub.unavailable_for {
        hub.heartbeats
            .push((report, StatusCode::SERVICE_UNAVAILABLE));
        return unavailable(hub.retry_after);
    }
    let answer = HeartbeatAnswer {
        incarnation: report.incarnation,
        accepted_seq: report.seq,
        config_generation: hub.generation,
        interval_seconds: 1,
        rotate_key: false,
    };
    hub.heartbeats.push((report, StatusCode::OK));
    Json(answer).into_response()
}

async fn config(State(hub): State<Shared>, headers: HeaderMap) -> Response {
    let mut hub = hub.lock().unwrap();
    let auth = headers[header::AUTHORIZATION].to_str().unwrap();
    let token = auth
        .strip_prefix(&format!("{AUTH_SCHEME} "))
        .expect("FleetPulse-JWS scheme");
    let payload = jws::parse(token, TYP_CONFIG_REQUEST)
        .unwrap()
        .verify(&hub.key)
        .unwrap();
    hub.config_requests
        .push(serde_json::from_slice(&payload).unwrap());
    let config = AgentConfig {
        generation: hub.generation,
        interval_seconds: 1,
        ..Default::default()
    };
    Json(config).into_response()
}

/// The test hub's state and its router (heartbeat and config endpoints).
pub(super) fn test_hub(
    key: VerifyingKey,
    unavailable_for: usize,
    generation: u64,
) -> (Router, Shared) {
    let hub = Arc::new(Mutex::new(Hub {
        key,
        unavailable_for,
        retry_after: None,
        arrivals: Vec::new(),
        generation,
        heartbeats: Vec::new(),
        config_requests: Vec::new(),
    }));
    let app = Router::new()
        .route("/v1/clusters/{ns}/{name}/heartbeat", post(heartbeat))
        .route("/v1/clusters/{ns}/{name}/config", get(config))
        .with_state(hub.clone());
    (app, hub)
}

/// Starts the hub and an agent (interval 200 ms until the hub says 1 s) reporting to it.
async fn start(unavailable_for: usize, generation: u64) -> (AgentHandle, Shared) {
    start_with(unavailable_for, None, generation).await
}

/// As [`start`], the 503s carrying `retry_after`.
async fn start_with(
    unavailable_for: usize,
    retry_after: Option<&'static str>,
    generation: u64,
) -> (AgentHandle, Shared) {
    let key = keys::generate();
    let (app, hub) = test_hub(key.verifying_key(), unavailable_for, generation);
    hub.lock().unwrap().retry_after = retry_after;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let opts = AgentOptions {
        allow_insecure_http: true,
        audience: "hub-test".into(),
        interval: Duration::from_millis(200),
        ..AgentOptions::new(
            Url::parse(&format!("http://{addr}")).unwrap(),
            ClusterId::new("fleet", "edge-1"),
            key,
        )
    };
    (spawn(opts).unwrap(), hub)
}

/// Polls `condition` until it holds, failing the test after [`DEADLINE`].
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn agent_recovers_after_three_503s_with_strictly_increasing_seqs() {
    let (agent, hub) = start(3, 0).await;
    let status = agent
        .wait_for(DEADLINE, |s| s.accepted_total >= 2)
        .await
        .unwrap();
    assert_eq!(status.consecutive_failures, 0);
    assert_eq!(
        status.interval,
        Duration::from_secs(1),
        "adopts the hub's interval"
    );

    let seen: Vec<_> = hub
        .lock()
        .unwrap()
        .heartbeats
        .iter()
        .map(|(r, s)| (r.clone(), *s))
        .collect();
    let codes: Vec<_> = seen.iter().map(|(_, s)| s.as_u16()).collect();
    assert_eq!(codes[..5], [503, 503, 503, 200, 200]);
    assert!(
        seen.windows(2).all(|w| w[1].0.seq == w[0].0.seq + 1),
        "every attempt a new seq"
    );
    assert!(
        seen.iter()
            .all(|(r, _)| r.incarnation == status.incarnation)
    );
    assert!(
        seen.iter()
            .all(|(r, _)| r.exp - r.iat == 300 && r.aud == "hub-test")
    );
    assert_eq!(seen[0].0.seq, 1);
    let accepted = |seq| {
        seen.iter()
            .any(|(r, s)| r.seq == seq && *s == StatusCode::OK)
    };
    assert!(accepted(status.last_accepted_seq().unwrap()));
    assert_eq!(
        seen[3].0.seq, 4,
        "the first accepted report is the fourth attempt"
    );
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_503_with_retry_after_read_from_the_header_holds_the_retry_back() {
    let (agent, hub) = start_with(1, Some("1"), 0).await;
    agent
        .wait_for(DEADLINE, |s| s.accepted_total >= 1)
        .await
        .unwrap();
    let arrivals = hub.lock().unwrap().arrivals.clone();
    let gap = arrivals[1] - arrivals[0];
    // Without the header the retry comes after 10 to 20 ms (at this 200 ms interval).
    assert!(gap >= Duration::from_secs(1), "retried after {gap:?}");
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn new_config_generation_is_pulled_with_a_signed_request_and_reported() {
    let (agent, hub) = start(0, 3).await;
    let status = agent
        .wait_for(DEADLINE, |s| s.config_generation == 3)
        .await
        .unwrap();
    assert_eq!(status.config.as_ref().unwrap().generation, 3);
    {
        let hub = hub.lock().unwrap();
        assert_eq!(hub.config_requests.len(), 1);
        let request = &hub.config_requests[0];
        assert_eq!(request.aud, "hub-test");
        assert_eq!(request.cluster, ClusterId::new("fleet", "edge-1"));
        assert_eq!(
            request.exp - request.iat,
            300,
            "a config request lives as long as a report"
        );
        assert_eq!(hub.heartbeats[0].0.config_generation, 0);
    }

    eventually("the next report carries generation 3", || {
        hub.lock()
            .unwrap()
            .heartbeats
            .iter()
            .any(|(r, _)| r.config_generation == 3)
    })
    .await;
    assert_eq!(
        hub.lock().unwrap().config_requests.len(),
        1,
        "pulled once per generation"
    );
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn spawn_refuses_an_http_hub_without_insecure_http() {
    let opts = AgentOptions::new(
        Url::parse("http://127.0.0.1:9").unwrap(),
        ClusterId::new("fleet", "edge-1"),
        keys::generate(),
    );
    let err = spawn(opts).unwrap_err();
    assert!(matches!(err, AgentError::InsecureHubUrl { .. }), "{err}");
    assert!(err.to_string().contains("--insecure-http"));
}

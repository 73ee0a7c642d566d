//! The agent endpoints: HTTP glue around the [`crate::admission`] pipeline. A heartbeat
//! that passed every step is applied by [`crate::fleet::Fleet::accept`] (the replay rule
//! and the state update, under the cluster's lock); a config pull is answered with the
//! cluster's effective config. Each refusal is reported to the limit on authentication
//! failures ([`crate::limiter::failures`]), which counts those that are such failures and
//! turns them into 429 once their source is over its limit; a request that authenticates
//! is served whatever its source's count. Every outcome is counted by its label.

use std::net::SocketAddr;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::protocol::report::ClusterId;

use super::AppState;
use crate::limiter::failures::Source;
use crate::refusal::Refusal;

/// The peer address the listener attaches to each request.
type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

/// `POST /v1/clusters/{namespace}/{name}/heartbeat`: a signed report.
pub async fn heartbeat(
    State(state): State<AppState>,
    peer: Peer,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let source = source(&peer);
    let now = Instant::now();
    let cluster = ClusterId::new(namespace, name);
    let registry = state.fleet.registry();
    let admitted = state
        .admission
        .heartbeat(
            &registry,
            state.fleet.enrolled_keys(),
            &cluster,
            &headers,
            body,
        )
        .await;
    let result = admitted.and_then(|a| state.fleet.accept(&a, now, Timestamp::now()));
    if let Err(refusal) = &result
        && let Err(limited) = state.failures.failed(source, refusal.0.code)
    {
        state.fleet.metrics().heartbeat(limited.label());
        return limited.into_response();
    }
    state.fleet.metrics().heartbeat(outcome(&result));
    match &result {
        Ok(answer) => tracing::trace!(%cluster, seq = answer.accepted_seq, "heartbeat accepted"),
        Err(refusal) => tracing::debug!(%cluster, code = refusal.label(), "heartbeat refused"),
    }
    result.map(Json).into_response()
}

/// `GET /v1/clusters/{namespace}/{name}/config` with `Authorization: FleetPulse-JWS <jws>`.
pub async fn config(
    State(state): State<AppState>,
    peer: Peer,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let source = source(&peer);
    let cluster = ClusterId::new(namespace, name);
    let registry = state.fleet.registry();
    let result = state
        .admission
        .config(&registry, state.fleet.enrolled_keys(), &cluster, &headers)
        .map(|a| state.fleet.config(&a.entry));
    if let Err(refusal) = &result
        && let Err(limited) = state.failures.failed(source, refusal.0.code)
    {
        state.fleet.metrics().config_request(limited.label());
        return limited.into_response();
    }
    state.fleet.metrics().config_request(outcome(&result));
    if let Err(refusal) = &result {
        tracing::debug!(%cluster, code = refusal.label(), "config request refused");
    }
    result.map(Json).into_response()
}

fn source(peer: &Peer) -> Option<Source> {
    Source::of_peer(peer.as_ref().map(|Extension(p)| p))
}

/// `accepted`, or the refusal's code: the `result` label of the request metrics.
fn outcome<T>(result: &Result<T, Refusal>) -> &'static str {
    match result {
        Ok(_) => "accepted",
        Err(refusal) => refusal.label(),
    }
}

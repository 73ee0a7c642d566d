//! The agent endpoints: HTTP glue around the [`crate::admission`] pipeline. A heartbeat
//! that passed every step is applied by [`crate::fleet::Fleet::accept`] (the replay rule
//! and the state update, under the cluster's lock); a config pull is answered with the
//! cluster's effective config. Each refusal is reported to the limit on authentication
//! failures ([`crate::limiter::failures`]), which counts those that are such failures and
//! turns them into 429 once their source is over its limit; a request that authenticates
//! is served whatever its source's count. Every outcome is counted by its label.
//!
//! The agents' listener matches these endpoints' paths itself and calls [`serve`], without
//! a pass through the router; the router's fallback ([`dispatch`]) serves them the same
//! way for callers of the router itself (tests).

use std::net::SocketAddr;
use std::time::Instant;

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::protocol::report::ClusterId;

use super::AppState;
use super::routes::{Endpoint, agent_endpoint};
use crate::limiter::failures::Source;
use crate::refusal::Refusal;

/// Every path the agents' router has no route for: the agent endpoints
/// ([`agent_endpoint`]), with `405` and `Allow` for the wrong method, else `404`.
pub async fn dispatch(State(state): State<AppState>, request: Request) -> Response {
    let Some((cluster, endpoint)) = agent_endpoint(request.uri().path()) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    serve(&state, cluster, endpoint, request).await
}

/// `request` for `endpoint` of `cluster`, by method: what [`dispatch`] does once it has
/// matched the path, for the listener to call on a path it matched itself.
pub async fn serve(
    state: &AppState,
    cluster: ClusterId,
    endpoint: Endpoint,
    request: Request,
) -> Response {
    let source = Source::of_peer(request.extensions().get::<ConnectInfo<SocketAddr>>());
    match (endpoint, request.method()) {
        (Endpoint::Heartbeat, &Method::POST) => heartbeat(state, source, cluster, request).await,
        (Endpoint::Config, &Method::GET | &Method::HEAD) => {
            config(state, source, cluster, request.headers())
        }
        (Endpoint::Heartbeat, _) => not_allowed("POST"),
        (Endpoint::Config, _) => not_allowed("GET,HEAD"),
    }
}

fn not_allowed(allow: &'static str) -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, HeaderValue::from_static(allow))],
    )
        .into_response()
}

/// `POST /v1/clusters/{namespace}/{name}/heartbeat`: a signed report. The request is
/// taken whole, so that its headers are read in place rather than copied.
async fn heartbeat(
    state: &AppState,
    source: Option<Source>,
    cluster: ClusterId,
    request: Request,
) -> Response {
    let now = Instant::now();
    let registry = state.fleet.registry();
    let (parts, body) = request.into_parts();
    let admitted = state
        .admission
        .heartbeat(
            &registry,
            state.fleet.enrolled_keys(),
            &cluster,
            &parts.headers,
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
fn config(
    state: &AppState,
    source: Option<Source>,
    cluster: ClusterId,
    headers: &HeaderMap,
) -> Response {
    let registry = state.fleet.registry();
    let result = state
        .admission
        .config(&registry, state.fleet.enrolled_keys(), &cluster, headers)
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

/// `accepted`, or the refusal's code: the `result` label of the request metrics.
fn outcome<T>(result: &Result<T, Refusal>) -> &'static str {
    match result {
        Ok(_) => "accepted",
        Err(refusal) => refusal.label(),
    }
}

//! The agent endpoints: HTTP glue around the [`crate::admission`] pipeline. A heartbeat
//! that passed every step is applied by [`crate::fleet::Fleet::accept`] (the replay rule
//! and the state update, under the cluster's lock); a config pull is answered with the
//! cluster's effective config. Every outcome is counted by its [`Refusal`] label.

use std::time::Instant;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::protocol::report::{AgentConfig, ClusterId, HeartbeatAnswer};

use super::AppState;
use crate::admission::Refusal;

/// `POST /v1/clusters/{namespace}/{name}/heartbeat`: a signed report.
pub async fn heartbeat(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<HeartbeatAnswer>, Refusal> {
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
    state.fleet.metrics().heartbeat(outcome(&result));
    match &result {
        Ok(answer) => tracing::trace!(%cluster, seq = answer.accepted_seq, "heartbeat accepted"),
        Err(refusal) => tracing::debug!(%cluster, code = refusal.label(), "heartbeat refused"),
    }
    result.map(Json)
}

/// `GET /v1/clusters/{namespace}/{name}/config` with `Authorization: FleetPulse-JWS <jws>`.
pub async fn config(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Json<AgentConfig>, Refusal> {
    let cluster = ClusterId::new(namespace, name);
    let registry = state.fleet.registry();
    let result = state
        .admission
        .config(&registry, state.fleet.enrolled_keys(), &cluster, &headers)
        .map(|a| state.fleet.config(&a.entry));
    state.fleet.metrics().config_request(outcome(&result));
    if let Err(refusal) = &result {
        tracing::debug!(%cluster, code = refusal.label(), "config request refused");
    }
    result.map(Json)
}

/// `accepted`, or the refusal's code: the `result` label of the request metrics.
fn outcome<T>(result: &Result<T, Refusal>) -> &'static str {
    match result {
        Ok(_) => "accepted",
        Err(refusal) => refusal.label(),
    }
}

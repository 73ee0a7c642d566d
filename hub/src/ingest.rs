//! The hub's HTTP API, as two axum [`Router`]s so tests call them in-process and the server
//! wraps each in TLS on its own listener: [`router`], what agents call (heartbeat, config)
//! and the probes, on the agents' port; [`admin_router`], the read API and `/metrics`, on
//! the admin port behind [`crate::server::admin`]'s authentication. The agent endpoints
//! are HTTP glue around the [`crate::admission`] pipeline.

pub mod agent;
pub mod read;
pub mod routes;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::routing::get;

use fleetpulse_common::api::{HealthPolicy, MemberCluster, Set};

use crate::admission::Admission;
use crate::fleet::Fleet;
use crate::limiter::failures::FailureLimit;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The fleet.
    pub fleet: Arc<Fleet>,
    /// The admission pipeline of agent requests.
    pub admission: Arc<Admission>,
    /// The per-source limit on authentication failures, shared with the admin listener
    /// (off by default, e.g. in tests that build the router in process).
    pub failures: Arc<FailureLimit>,
}

/// The agents' router, once the hub has loaded its objects and state (before, the hub
/// serves [`crate::server::standby::router`], whose `/readyz` says why it is not ready).
/// Nothing here reads the fleet's objects back: that is [`admin_router`]'s.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        // `/v1/clusters/{namespace}/{name}/heartbeat` (POST) and `.../config` (GET),
        // matched by `routes` rather than as routes with parameters.
        .fallback(agent::dispatch)
        .with_state(state)
}

/// The admin router: the read API and `/metrics`, for operators, the CLI and Prometheus.
pub fn admin_router(state: AppState) -> Router {
    Router::new()
        .route("/v1/memberclusters", get(read::objects::<MemberCluster>))
        .route(
            "/v1/memberclusters/{namespace}/{name}/transitions",
            get(read::transitions),
        )
        .route("/v1/clustersets", get(read::cluster_sets))
        .route("/v1/sets", get(read::objects::<Set>))
        .route("/v1/healthpolicies", get(read::objects::<HealthPolicy>))
        .route("/v1/hub", get(read::hub))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn metrics(State(state): State<AppState>) -> impl axum::response::IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.fleet.encode_metrics(),
    )
}

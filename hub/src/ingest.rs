//! The hub's HTTP API: the agent endpoints (heartbeat, config), the read API and probes.
//! Built as one axum [`Router`] so tests call it in-process and the server wraps it in TLS.
//!
//! Heartbeat signatures are verified in batches of concurrent heartbeats ([`batch`]), or
//! one by one with `verify_strict` when batching is off.

pub mod agent;
pub mod batch;
pub mod error;
pub mod read;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRef, State};
use axum::http::StatusCode;
use axum::routing::{get, post};

use fleetpulse_common::protocol::limits::MAX_BODY_BYTES;

pub use batch::{BatchSettings, BatchVerifier};
pub use error::ApiError;

use crate::fleet::Fleet;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The fleet.
    pub fleet: Arc<Fleet>,
    /// Set once the hub loaded its objects and restored its state.
    pub ready: Arc<AtomicBool>,
}

/// What the router's handlers share: the [`AppState`] and, when batching is on, the
/// batch verifier of heartbeat signatures.
#[derive(Clone)]
pub struct IngestState {
    /// The shared hub state.
    pub app: AppState,
    /// Batches concurrent heartbeats' signatures; `None`: one `verify_strict` each.
    pub batch: Option<Arc<BatchVerifier>>,
}

impl FromRef<IngestState> for AppState {
    fn from_ref(state: &IngestState) -> AppState {
        state.app.clone()
    }
}

/// The hub's router, batching heartbeat signature checks with `batch` (`None`: one
/// `verify_strict` per heartbeat).
pub fn router(state: AppState, batch: Option<BatchSettings>) -> Router {
    if let Some(settings) = &batch {
        tracing::info!(
            max_batch = settings.max_batch,
            max_wait_ms = settings.max_wait.as_millis() as u64,
            "heartbeat signatures are verified in batches"
        );
    }
    let state = IngestState {
        app: state,
        batch: batch.map(BatchVerifier::new),
    };
    Router::new()
        .route(
            "/v1/clusters/{namespace}/{name}/heartbeat",
            post(agent::heartbeat),
        )
        .route("/v1/clusters/{namespace}/{name}/config", get(agent::config))
        .route("/v1/memberclusters", get(read::member_clusters))
        .route(
            "/v1/memberclusters/{namespace}/{name}/transitions",
            get(read::transitions),
        )
        .route("/v1/clustersets", get(read::cluster_sets))
        .route("/v1/sets", get(read::sets))
        .route("/v1/healthpolicies", get(read::health_policies))
        .route("/v1/hub", get(read::hub))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    if state.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "loading objects and state")
    }
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

//! What a hub serves before it leads: probes, and `503 unavailable` for everything else,
//! so a Service routes agents to the leader (this replica is not ready) and an agent that
//! still reaches it backs off and retries.

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;

use fleetpulse_common::protocol::errors::RejectCode;

use crate::ingest::ApiError;

/// The router of a replica that is loading or standing by; `why` is its `/readyz` answer.
pub fn router(why: &'static str) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || async move { (StatusCode::SERVICE_UNAVAILABLE, why) }),
        )
        .fallback(move || async move { ApiError::new(RejectCode::Unavailable, why) })
}

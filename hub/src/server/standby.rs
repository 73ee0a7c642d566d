//! What a hub serves before it leads: probes, and `503 unavailable` for everything else,
//! so an agent that reaches it backs off and retries. A standby is ready when a Service
//! can tell the leader by its Pod label (see `kubernetes::leader`), so rolling updates
//! work; otherwise it is not ready, so a Service routes by readiness to the leader. On the
//! admin port, `/metrics` says only `fleetpulse_hub_leader 0`, so "no replica leads" is a
//! query, and the read API is `503 unavailable`.

use axum::Router;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;

use fleetpulse_common::protocol::errors::RejectCode;

use crate::refusal::Refusal;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const NOT_LEADER: &str = "# HELP fleetpulse_hub_leader 1 on the replica that leads and serves agents (standbys expose 0).\n\
# TYPE fleetpulse_hub_leader gauge\nfleetpulse_hub_leader 0\n# EOF\n";

/// The router of a replica that is loading or standing by; `why` is its `/readyz` answer.
pub fn router(why: impl Into<std::sync::Arc<str>>, ready: bool) -> Router {
    let why: std::sync::Arc<str> = why.into();
    let refusal = why.clone();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || async move { (status, why.to_string()) }),
        )
        .fallback(move || {
            let why = refusal.to_string();
            async move { Refusal::new(RejectCode::Unavailable, why) }
        })
}

/// The admin router of a replica that is loading or standing by: `/metrics` with
/// `fleetpulse_hub_leader 0`, the console's page (which then shows why it has no data),
/// and `503 unavailable` saying `why` for the read API.
pub fn admin_router(why: impl Into<std::sync::Arc<str>>) -> Router {
    let why: std::sync::Arc<str> = why.into();
    crate::console::assets_router()
        .route(
            "/metrics",
            get(|| async { ([(CONTENT_TYPE, OPENMETRICS)], NOT_LEADER) }),
        )
        .fallback(move || {
            let why = why.to_string();
            async move { Refusal::new(RejectCode::Unavailable, why) }
        })
}

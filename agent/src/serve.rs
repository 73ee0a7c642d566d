//! The agent's own HTTP endpoint (`run --listen ADDR`), plain HTTP for the kubelet's probes
//! and Prometheus; nothing of the heartbeat protocol comes in here (the agent still never
//! accepts a connection from the hub).
//!
//! - `/healthz`: 200 while the heartbeat loop runs. It does not depend on the hub: an
//!   agent that cannot reach its hub is not helped by a restart, so a hub outage never
//!   fails liveness.
//! - `/readyz`: 200 once the hub has accepted a heartbeat within the last
//!   [`READY_INTERVALS`] heartbeat intervals; 503 before the first acceptance and while
//!   the hub refuses or cannot be reached for longer. The body says which. A Pod that is
//!   not Ready is how `kubectl get pods` in the managed cluster shows an agent the hub
//!   does not hear, and it stops a rolling update whose new agents cannot report.
//! - `/metrics`: [`crate::metrics::AgentMetrics`] in the Prometheus text format.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::checks::ChecksSource;
use crate::metrics::AgentMetrics;
use crate::runner::AgentStatus;

/// `/readyz` fails once this many intervals passed without an accepted heartbeat (the
/// hub's default grace period is four intervals: readiness fails before the hub calls the
/// cluster unreachable).
pub const READY_INTERVALS: u32 = 3;

/// What the endpoint reads: the loop's status, the checks' results and the metrics.
#[derive(Clone)]
pub struct Endpoint {
    /// The heartbeat loop's status (its sender is dropped when the loop ends).
    pub status: watch::Receiver<AgentStatus>,
    /// Where the per-check metrics come from.
    pub checks: Arc<dyn ChecksSource>,
    /// The metrics the loop and the engine record.
    pub metrics: AgentMetrics,
}

/// The router: `/healthz`, `/readyz`, `/metrics`.
pub fn router(endpoint: Endpoint) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(endpoint)
}

/// Serves the router on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: TcpListener,
    endpoint: Endpoint,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(endpoint))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

/// Whether the agent is ready at `now`: `Ok` with what it found, or `Err` saying why not.
pub fn readiness(
    last_accepted: Option<SystemTime>,
    interval: Duration,
    now: SystemTime,
) -> Result<String, String> {
    let Some(at) = last_accepted else {
        return Err("the hub has not accepted a heartbeat yet".into());
    };
    let age = now.duration_since(at).unwrap_or_default();
    let limit = interval * READY_INTERVALS;
    if age <= limit {
        Ok(format!(
            "the hub accepted a heartbeat {}s ago",
            age.as_secs()
        ))
    } else {
        Err(format!(
            "no heartbeat accepted for {}s (more than {READY_INTERVALS} intervals of {}s)",
            age.as_secs(),
            interval.as_secs()
        ))
    }
}

async fn healthz(State(e): State<Endpoint>) -> impl IntoResponse {
    // `has_changed` fails only once the loop dropped its status sender: it has ended.
    match e.status.has_changed() {
        Ok(_) => (StatusCode::OK, "ok\n".to_owned()),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the heartbeat loop has ended\n".to_owned(),
        ),
    }
}

async fn readyz(State(e): State<Endpoint>) -> impl IntoResponse {
    let interval = e.status.borrow().interval;
    match readiness(e.metrics.last_accepted(), interval, SystemTime::now()) {
        Ok(why) => (StatusCode::OK, format!("ready: {why}\n")),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

async fn metrics_text(State(e): State<Endpoint>) -> impl IntoResponse {
    let results = e.checks.results();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        e.metrics.encode(&results),
    )
}

#[cfg(test)]
mod tests;

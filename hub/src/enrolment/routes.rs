//! `POST /v1/enrol` and `POST /v1/rotate`. Both answer JSON; refusals carry the protocol's
//! error body with a stable code. The store is SQLite, so the rules run on the blocking
//! pool.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use k8s_openapi::jiff::Timestamp;
use serde::de::DeserializeOwned;

use fleetpulse_common::enrol::message::{
    EnrolState, MAX_ENROL_BODY_BYTES, RegistrationRequest, RotationRequest,
};
use fleetpulse_common::enrol::{ENROL_PATH, ROTATE_PATH};
use fleetpulse_common::protocol::errors::RejectCode;

use super::Enrolment;
use crate::fleet::Fleet;
use crate::refusal::Refusal;

#[derive(Clone)]
struct Shared {
    enrolment: Arc<Enrolment>,
    fleet: Arc<Fleet>,
}

/// The enrolment routes, to merge into the hub's router.
pub fn router(enrolment: Arc<Enrolment>, fleet: Arc<Fleet>) -> Router {
    Router::new()
        .route(ENROL_PATH, post(enrol))
        .route(ROTATE_PATH, post(rotate))
        .layer(DefaultBodyLimit::max(MAX_ENROL_BODY_BYTES))
        .with_state(Shared { enrolment, fleet })
}

fn parse<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    what: &str,
) -> Result<T, Refusal> {
    let body = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Refusal::new(
                RejectCode::BodyTooLarge,
                format!("a {what} is at most {MAX_ENROL_BODY_BYTES} bytes"),
            )
        } else {
            Refusal::new(
                RejectCode::MalformedEnrolment,
                format!("cannot read the body: {r}"),
            )
        }
    })?;
    serde_json::from_slice(&body).map_err(|e| {
        Refusal::new(
            RejectCode::MalformedEnrolment,
            format!("body is not a {what} (JSON): {e}"),
        )
    })
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Refusal> + Send + 'static,
) -> Result<T, Refusal> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        tracing::error!(error = %e, "enrolment task failed");
        Err(Refusal::new(
            RejectCode::Unavailable,
            "the hub failed; try again",
        ))
    })
}

async fn enrol(
    State(shared): State<Shared>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let source = peer.map_or_else(
        || "unknown".to_owned(),
        |Extension(ConnectInfo(a))| a.ip().to_string(),
    );
    let result = blocking(move || {
        let request: RegistrationRequest = parse(body, "registration request")?;
        shared
            .enrolment
            .register(
                &shared.fleet,
                &request,
                &source,
                Timestamp::now().as_second(),
                Instant::now(),
            )
            .map_err(Refusal::from)
    })
    .await;
    match result {
        Ok(answer) => {
            let status = match answer.state {
                EnrolState::Enrolled => StatusCode::OK,
                EnrolState::AwaitingApproval => StatusCode::ACCEPTED,
            };
            (status, Json(answer)).into_response()
        }
        Err(e) => {
            tracing::info!(code = %e.0.code, message = %e.0.message, "enrolment refused");
            e.into_response()
        }
    }
}

async fn rotate(State(shared): State<Shared>, body: Result<Bytes, BytesRejection>) -> Response {
    let result = blocking(move || {
        let request: RotationRequest = parse(body, "rotation request")?;
        shared
            .enrolment
            .rotate(&shared.fleet, &request, Timestamp::now().as_second())
            .map_err(Refusal::from)
    })
    .await;
    match result {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => {
            tracing::info!(code = %e.0.code, message = %e.0.message, "rotation refused");
            e.into_response()
        }
    }
}

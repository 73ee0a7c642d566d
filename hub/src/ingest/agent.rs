//! The agent endpoints. Verification runs cheapest first and touches no state until every
//! step passed: size, media type, JWS structure, cluster and key lookup, signature,
//! report parsing, then the replay rules (inside [`Fleet::accept`]).

use std::time::Instant;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::report::{
    AgentConfig, ClusterId, ConfigRequest, HeartbeatAnswer, HeartbeatReport,
};
use fleetpulse_common::protocol::{
    AUTH_SCHEME, CONTENT_TYPE_JOSE, TYP_CONFIG_REQUEST, TYP_HEARTBEAT, jws, limits, replay,
};

use super::{ApiError, AppState, IngestState};
use crate::fleet::Fleet;

/// `POST /v1/clusters/{namespace}/{name}/heartbeat`: a signed report.
pub async fn heartbeat(
    State(state): State<IngestState>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<HeartbeatAnswer>, ApiError> {
    let result = accept_heartbeat(&state, ClusterId::new(namespace, name), &headers, body).await;
    state.app.fleet.metrics().heartbeat(outcome(&result));
    result
}

/// `accepted`, or the rejection code: the `result` label of the request metrics.
fn outcome<T>(result: &Result<T, ApiError>) -> &'static str {
    match result {
        Ok(_) => "accepted",
        Err(e) => e.0.code.as_str(),
    }
}

async fn accept_heartbeat(
    state: &IngestState,
    cluster: ClusterId,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<HeartbeatAnswer>, ApiError> {
    let now = Instant::now();
    check_content_type(headers)?;
    let body = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                RejectCode::BodyTooLarge,
                format!(
                    "body exceeds {} bytes; report fewer or shorter check results",
                    limits::MAX_BODY_BYTES
                ),
            )
        } else {
            ApiError::new(
                RejectCode::MalformedJws,
                format!("cannot read the body: {r}"),
            )
        }
    })?;
    let fleet = &state.app.fleet;
    let unverified = parse_jws(&body, TYP_HEARTBEAT)?;
    let (entry, key) = fleet.lookup(&cluster, unverified.kid())?;
    let verified = match &state.batch {
        Some(batch) => {
            // The signing input is a part of `body`: shared, not copied.
            let message = body.slice_ref(unverified.signing_input());
            batch.verify(message, *unverified.signature(), key).await
        }
        None => key
            .verify_strict(unverified.signing_input(), unverified.signature())
            .is_ok(),
    };
    let payload = unverified
        .payload_if_verified(verified)
        .map_err(signature_error)?;
    let report: HeartbeatReport = serde_json::from_slice(&payload).map_err(|e| {
        ApiError::new(
            RejectCode::MalformedReport,
            format!("signed payload is not a heartbeat report: {e}"),
        )
    })?;
    report
        .validate()
        .map_err(|e| ApiError::new(RejectCode::MalformedReport, e))?;
    let answer = fleet
        .accept(&entry, unverified.kid(), &report, now, Timestamp::now())
        .inspect_err(
            |r| tracing::debug!(cluster = %cluster, code = %r.code, "heartbeat refused"),
        )?;
    tracing::trace!(cluster = %cluster, seq = report.seq, "heartbeat accepted");
    Ok(Json(answer))
}

/// `GET /v1/clusters/{namespace}/{name}/config` with `Authorization: FleetPulse-JWS <jws>`.
pub async fn config(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Json<AgentConfig>, ApiError> {
    let result = serve_config(&state, ClusterId::new(namespace, name), &headers);
    state.fleet.metrics().config_request(outcome(&result));
    result
}

fn serve_config(
    state: &AppState,
    cluster: ClusterId,
    headers: &HeaderMap,
) -> Result<Json<AgentConfig>, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix(AUTH_SCHEME))
        .and_then(|v| v.strip_prefix(' '))
        .ok_or_else(|| {
            ApiError::new(
                RejectCode::MalformedJws,
                format!("missing `Authorization: {AUTH_SCHEME} <jws>` header"),
            )
        })?;
    let payload = verified_payload(&state.fleet, &cluster, token.as_bytes(), TYP_CONFIG_REQUEST)?;
    let request: ConfigRequest = serde_json::from_slice(&payload.bytes).map_err(|e| {
        ApiError::new(
            RejectCode::MalformedReport,
            format!("signed payload is not a config request: {e}"),
        )
    })?;
    let settings = state.fleet.settings();
    if request.aud != settings.audience {
        return Err(ApiError::new(
            RejectCode::WrongAudience,
            format!(
                "request is addressed to hub {:?}, this hub is {:?}",
                request.aud, settings.audience
            ),
        ));
    }
    if request.cluster != cluster {
        return Err(ApiError::new(
            RejectCode::ClusterMismatch,
            format!(
                "request is about {} but was sent for {cluster}",
                request.cluster
            ),
        ));
    }
    replay::check_fresh(
        request.iat,
        request.exp,
        Timestamp::now().as_second(),
        settings.freshness,
    )?;
    Ok(Json(state.fleet.config(&payload.entry)))
}

struct Verified {
    entry: std::sync::Arc<crate::fleet::ClusterEntry>,
    bytes: Vec<u8>,
}

fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let media = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        });
    if media.as_deref() == Some(CONTENT_TYPE_JOSE) {
        Ok(())
    } else {
        Err(ApiError::new(
            RejectCode::UnsupportedMediaType,
            format!(
                "Content-Type must be {CONTENT_TYPE_JOSE} (a JWS compact serialization), got {media:?}"
            ),
        ))
    }
}

/// JWS structure, cluster and key rules, then the signature; returns the payload.
fn verified_payload(
    fleet: &Fleet,
    cluster: &ClusterId,
    body: &[u8],
    typ: &str,
) -> Result<Verified, ApiError> {
    let unverified = parse_jws(body, typ)?;
    let (entry, key) = fleet.lookup(cluster, unverified.kid())?;
    let bytes = unverified.verify(&key).map_err(signature_error)?;
    Ok(Verified { entry, bytes })
}

/// The JWS structure and header rules.
fn parse_jws<'a>(body: &'a [u8], typ: &str) -> Result<jws::Unverified<'a>, ApiError> {
    let compact = std::str::from_utf8(body)
        .map_err(|_| ApiError::new(RejectCode::MalformedJws, "body is not ASCII text"))?
        .trim();
    jws::parse(compact, typ).map_err(|e| ApiError::new(RejectCode::MalformedJws, e.to_string()))
}

fn signature_error(e: jws::JwsError) -> ApiError {
    match e {
        jws::JwsError::BadSignature(_) => ApiError::new(
            RejectCode::BadSignature,
            format!("{e}; the report was altered or signed by another key"),
        ),
        other => ApiError::new(RejectCode::MalformedJws, other.to_string()),
    }
}

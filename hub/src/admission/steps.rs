//! The admission steps, one function each, named as the pipeline in [`super`] lists
//! them. Each either passes what the next step needs or refuses with a [`Refusal`] that
//! names what failed and what to do.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use ed25519_dalek::VerifyingKey;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;

use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::limits::MAX_BODY_BYTES;
use fleetpulse_common::protocol::report::{ClusterId, HeartbeatReport};
use fleetpulse_common::protocol::{AUTH_SCHEME, CONTENT_TYPE_JOSE, jws};

use crate::fleet::{ClusterEntry, EnrolledKeys, Registry};
use crate::refusal::Refusal;

/// A header's value, when it is present and visible ASCII.
fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn too_large() -> Refusal {
    Refusal::new(
        RejectCode::BodyTooLarge,
        format!("body exceeds {MAX_BODY_BYTES} bytes; report fewer or shorter check results"),
    )
}

/// Step 1, before reading: a declared `Content-Length` over [`MAX_BODY_BYTES`].
pub fn declared_size(headers: &HeaderMap) -> Result<(), Refusal> {
    let declared =
        header_str(headers, header::CONTENT_LENGTH).and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(len) if len > MAX_BODY_BYTES as u64 => Err(too_large()),
        _ => Ok(()),
    }
}

/// Step 1, while reading: the body, read only up to [`MAX_BODY_BYTES`] (a body sent
/// without a length, or longer than declared, is cut off there).
pub async fn read_body(body: Body) -> Result<Bytes, Refusal> {
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Err(e) => Err(Refusal::new(
            RejectCode::MalformedJws,
            format!("cannot read the body: {e}"),
        )),
    }
}

/// Step 2: the body is a JWS compact serialization (`application/jose`).
pub fn media_type(headers: &HeaderMap) -> Result<(), Refusal> {
    let media = header_str(headers, header::CONTENT_TYPE)
        .map(|v| v.split(';').next().unwrap_or_default().trim());
    if media.is_some_and(|m| m.eq_ignore_ascii_case(CONTENT_TYPE_JOSE)) {
        Ok(())
    } else {
        Err(Refusal::new(
            RejectCode::UnsupportedMediaType,
            format!(
                "Content-Type must be {CONTENT_TYPE_JOSE} (a JWS compact serialization), got {media:?}"
            ),
        ))
    }
}

/// Where a config pull carries its JWS: `Authorization: FleetPulse-JWS <jws>`.
pub fn authorization(headers: &HeaderMap) -> Result<&str, Refusal> {
    header_str(headers, header::AUTHORIZATION)
        .and_then(|v| v.strip_prefix(AUTH_SCHEME))
        .and_then(|v| v.strip_prefix(' '))
        .ok_or_else(|| {
            Refusal::new(
                RejectCode::MalformedJws,
                format!("missing `Authorization: {AUTH_SCHEME} <jws>` header"),
            )
        })
}

/// Step 3: the JWS structure and header rules, for a JWS of type `typ`.
pub fn jws_shape<'a>(body: &'a [u8], typ: &str) -> Result<jws::Unverified<'a>, Refusal> {
    let compact = std::str::from_utf8(body)
        .map_err(|_| Refusal::new(RejectCode::MalformedJws, "body is not ASCII text"))?
        .trim();
    jws::parse(compact, typ).map_err(|e| Refusal::new(RejectCode::MalformedJws, e.to_string()))
}

/// Step 4: the cluster exists, and the key `kid` exists (listed in a spec, or else
/// `enrolled`), is bound to it and is not revoked. Returns the cluster's entry and the key.
pub fn key(
    registry: &Registry,
    enrolled: Option<&dyn EnrolledKeys>,
    cluster: &ClusterId,
    kid: &str,
) -> Result<(Arc<ClusterEntry>, VerifyingKey), Refusal> {
    let Some(entry) = registry.cluster(cluster) else {
        return Err(Refusal::new(
            RejectCode::UnknownCluster,
            format!(
                "no MemberCluster {cluster} on this hub; create it, or fix the agent's --cluster"
            ),
        ));
    };
    let Some(binding) = registry.key(kid) else {
        if let Some(found) = enrolled.and_then(|e| e.lookup(cluster, kid)) {
            return found.map(|key| (entry.clone(), key)).map_err(Refusal::from);
        }
        return Err(Refusal::new(
            RejectCode::UnknownKey,
            format!(
                "key {kid} is not in spec.agent.publicKeys of any MemberCluster; add the \
                 agent's public key to MemberCluster {cluster}"
            ),
        ));
    };
    if binding.cluster != *cluster {
        return Err(Refusal::new(
            RejectCode::KeyNotForCluster,
            format!(
                "key {kid} belongs to MemberCluster {}, not {cluster}",
                binding.cluster
            ),
        ));
    }
    if binding.revoked {
        return Err(Refusal::new(
            RejectCode::KeyRevoked,
            format!("key {kid} of MemberCluster {cluster} is revoked; give the agent a new key"),
        ));
    }
    Ok((entry.clone(), binding.key))
}

/// Step 5: whether the signature `verified`; returns the payload only if it did.
pub fn signature(unverified: &jws::Unverified<'_>, verified: bool) -> Result<Vec<u8>, Refusal> {
    unverified
        .payload_if_verified(verified)
        .map_err(|e| match e {
            jws::JwsError::BadSignature(_) => Refusal::new(
                RejectCode::BadSignature,
                format!("{e}; the report was altered or signed by another key"),
            ),
            other => Refusal::new(RejectCode::MalformedJws, other.to_string()),
        })
}

/// Step 6: the signed payload is a `T` (`what`, for the message).
pub fn parse<T: DeserializeOwned>(payload: &[u8], what: &str) -> Result<T, Refusal> {
    serde_json::from_slice(payload).map_err(|e| {
        Refusal::new(
            RejectCode::MalformedReport,
            format!("signed payload is not a {what}: {e}"),
        )
    })
}

/// Step 6, for heartbeats: the report is within the protocol's limits.
pub fn valid_report(report: &HeartbeatReport) -> Result<(), Refusal> {
    report
        .validate()
        .map_err(|e| Refusal::new(RejectCode::MalformedReport, e))
}

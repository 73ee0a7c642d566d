//! The admission steps, one function each, named as the pipeline in [`super`] lists
//! them. Each either passes what the next step needs or refuses with a [`Refusal`] that
//! names what failed and what to do.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::Deserialize;

use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::keys::StrongKey;
use fleetpulse_common::protocol::limits::MAX_BODY_BYTES;
use fleetpulse_common::protocol::report::{CheckResult, ClusterId, HeartbeatReport, RawChecks};
use fleetpulse_common::protocol::{AUTH_SCHEME, CONTENT_TYPE_JOSE, jws};

use crate::core::cluster::Report;
use crate::core::digest;
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
) -> Result<(Arc<ClusterEntry>, StrongKey), Refusal> {
    let binding = registry.key(kid);
    // A listed key of this cluster (nearly every heartbeat): its binding holds the entry,
    // so the cluster is not looked up as well.
    if let Some(binding) = binding
        && binding.entry.id == *cluster
    {
        if binding.revoked {
            return Err(Refusal::new(
                RejectCode::KeyRevoked,
                format!(
                    "key {kid} of MemberCluster {cluster} is revoked; give the agent a new key"
                ),
            ));
        }
        return Ok((binding.entry.clone(), binding.key));
    }
    let Some(entry) = registry.cluster(cluster) else {
        return Err(Refusal::new(
            RejectCode::UnknownCluster,
            format!(
                "no MemberCluster {cluster} on this hub; create it, or fix the agent's --cluster"
            ),
        ));
    };
    match binding {
        Some(binding) => Err(Refusal::new(
            RejectCode::KeyNotForCluster,
            format!(
                "key {kid} belongs to MemberCluster {}, not {cluster}",
                binding.entry.id
            ),
        )),
        None => match enrolled.and_then(|e| e.lookup(cluster, kid)) {
            Some(found) => found.map(|key| (entry.clone(), key)).map_err(Refusal::from),
            None => Err(Refusal::new(
                RejectCode::UnknownKey,
                format!(
                    "key {kid} is not in spec.agent.publicKeys of any MemberCluster; add the \
                     agent's public key to MemberCluster {cluster}"
                ),
            )),
        },
    }
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
pub fn parse<'a, T: Deserialize<'a>>(payload: &'a [u8], what: &str) -> Result<T, Refusal> {
    serde_json::from_slice(payload).map_err(|e| {
        Refusal::new(
            RejectCode::MalformedReport,
            format!("signed payload is not a {what}: {e}"),
        )
    })
}

/// Step 6, for heartbeats: the check results `signed` carries as text, taken from what
/// `entry` kept of the last accepted report when the text is the same (by its digest,
/// returned too, with whether they were taken so), else parsed.
pub fn checks(
    signed: HeartbeatReport<RawChecks<'_>>,
    entry: &ClusterEntry,
) -> Result<(Report, u64, bool), Refusal> {
    let raw = signed.checks;
    let text = digest::of(raw.text());
    let kept = entry.state.lock().agent_checks(text);
    let repeated = kept.is_some();
    let checks: Arc<[CheckResult]> = match kept {
        Some(checks) => checks,
        None => raw.parse().map(Arc::from).map_err(|e| {
            Refusal::new(
                RejectCode::MalformedReport,
                format!("signed payload is not a heartbeat report: checks: {e}"),
            )
        })?,
    };
    Ok((signed.with_checks(checks), text, repeated))
}

/// Step 6, for heartbeats, before parsing: the report `entry` kept, if `payload` is its
/// text with another position and times ([`crate::core::repeat`]), with the digest of its
/// check results' text; its position is checked as [`valid_report`] checks it (the rest is
/// the kept report's, which was).
pub fn repeated(payload: &[u8], entry: &ClusterEntry) -> Option<Result<(Report, u64), Refusal>> {
    let (report, checks) = entry.state.lock().repeated(payload)?;
    Some(
        report
            .validate_position()
            .map(|()| (report, checks))
            .map_err(|e| Refusal::new(RejectCode::MalformedReport, e)),
    )
}

/// Step 6, for heartbeats: the report is within the protocol's limits.
pub fn valid_report(report: &Report) -> Result<(), Refusal> {
    report
        .validate()
        .map_err(|e| Refusal::new(RejectCode::MalformedReport, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;
    use std::time::Instant;

    use crate::fleet::{Objects, Settings, shared};
    use crate::testing;

    fn signed(checks: &str) -> String {
        let id = ClusterId::new("fleet", "a");
        let report = serde_json::to_value(testing::report(&id).seq(1).build()).unwrap();
        let mut report = report.as_object().unwrap().clone();
        report.remove("checks");
        let head = serde_json::to_string(&report).unwrap();
        match checks {
            "" => head,
            checks => format!("{},\"checks\":{checks}}}", &head[..head.len() - 1]),
        }
    }

    fn entry() -> Arc<ClusterEntry> {
        let fleet = testing::fleet_in_memory(Settings::default());
        let objects = Objects {
            member_clusters: shared(vec![testing::cluster("fleet/a").build()]),
            ..Default::default()
        };
        fleet.reload(objects, Instant::now(), Timestamp::now());
        let id = ClusterId::new("fleet", "a");
        fleet.registry().cluster(&id).unwrap().clone()
    }

    fn checks_of(payload: &str, entry: &ClusterEntry) -> Result<Arc<[CheckResult]>, Refusal> {
        let signed: HeartbeatReport<RawChecks<'_>> = parse(payload.as_bytes(), "report")?;
        checks(signed, entry).map(|(report, _, _)| report.checks)
    }

    const ONE: &str = r#"[{"name":"nodes","kind":"readyNodes","phase":"readiness","passing":true,"message":"3 of 3"}]"#;

    #[test]
    fn check_results_signed_as_the_last_accepted_text_are_the_kept_ones() {
        let entry = entry();
        let parsed = checks_of(&signed(ONE), &entry).unwrap();
        assert_eq!(parsed[0].message, "3 of 3");
        // What the hub kept for that text says something else, so taking it shows that
        // the text was not parsed again.
        let mut kept = parsed.to_vec();
        kept[0].message = "as kept".into();
        let report = testing::report(&entry.id)
            .checks(kept)
            .build()
            .into_shared();
        let mut state = entry.state.lock();
        state.record_heartbeat("kid", &report, Timestamp::now());
        state.recorded_agent_checks(Some(digest::of(ONE)), 1);
        drop(state);
        assert_eq!(
            checks_of(&signed(ONE), &entry).unwrap()[0].message,
            "as kept"
        );
        let other = ONE.replace("3 of 3", "2 of 3");
        assert_eq!(
            checks_of(&signed(&other), &entry).unwrap()[0].message,
            "2 of 3"
        );
    }

    #[test]
    fn a_text_repeating_the_kept_reports_with_other_numbers_is_read_from_the_kept_report() {
        let entry = entry();
        let first = testing::report(&entry.id).seq(1).build();
        let text = serde_json::to_vec(&first).unwrap();
        let shape = crate::core::repeat::Shape::of(&text).unwrap();
        // What is kept says something else than the text, so reading it shows that the
        // next text was not parsed.
        let mut kept = first.clone().into_shared();
        kept.agent_version = "as kept".into();
        entry.state.lock().keep_report(shape, &kept, 7);
        let next = serde_json::to_vec(&HeartbeatReport { seq: 2, ..first }).unwrap();
        let (report, checks) = repeated(&next, &entry).unwrap().unwrap();
        assert_eq!(
            (report.seq, report.agent_version.as_str(), checks),
            (2, "as kept", 7)
        );
        let other = String::from_utf8(next)
            .unwrap()
            .replace("fleetpulse", "fleetpulsf");
        assert!(
            repeated(other.as_bytes(), &entry).is_none(),
            "another text is parsed"
        );
    }

    #[test]
    fn check_results_absent_are_none_and_null_or_malformed_are_refused() {
        let entry = entry();
        assert_eq!(checks_of(&signed(""), &entry).unwrap()[..], []);
        for bad in ["null", r#"[{"name":"nodes"}]"#, "{}"] {
            let refusal = checks_of(&signed(bad), &entry).unwrap_err();
            assert_eq!(refusal.0.code, RejectCode::MalformedReport, "{bad}");
        }
        let refusal = checks_of(&signed(r#"[{"name":1}]"#), &entry).unwrap_err();
        assert!(
            refusal.0.message.contains("checks: invalid type"),
            "{:?}",
            refusal.0
        );
    }
}

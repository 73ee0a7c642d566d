//! One admission pipeline for every agent request. A request is admitted only after each
//! step below passed, in this order (cheapest first; nothing is read or changed before
//! the step that needs it):
//!
//! 1. **size**: a declared `Content-Length` over the limit is refused before the body is
//!    read, and the body is read only up to the limit;
//! 2. **media type**: `application/jose`;
//! 3. **JWS shape**: compact serialization, `alg`, `typ` and `kid` header rules;
//! 4. **key**: known (listed in a MemberCluster, or enrolled with a bootstrap token),
//!    bound to the cluster in the URL, not revoked;
//! 5. **signature**: verified with that key (in a batch of concurrent heartbeats, or
//!    strictly one by one);
//! 6. **parse**: the signed payload is a well-formed report or request (a heartbeat whose
//!    text is the last accepted report's with another position and times is read from
//!    that report, [`crate::core::repeat`]; else its check results are parsed only when
//!    their signed text differs from the last accepted report's: the same text says the
//!    same, so the results kept are taken);
//! 7. **audience**: addressed to this hub, about the cluster in the URL;
//! 8. **freshness**: `iat`/`exp` within the window;
//! 9. **replay** (heartbeats): above the last position accepted for the key, checked by
//!    [`Fleet::accept`](crate::fleet::Fleet::accept) under the cluster's lock, where the
//!    new position is recorded.
//!
//! Heartbeats run every step; config pulls carry their JWS in the `Authorization` header,
//! so they have no body (steps 1 and 2) and no sequence (step 9). Every step refuses with
//! one type, [`Refusal`]: the JSON body, the metric label and the log field at once.

pub mod batch;
pub mod steps;

use std::sync::Arc;

use axum::body::Body;
use axum::http::HeaderMap;
use ed25519_dalek::VerifyingKey;

use fleetpulse_common::protocol::replay::{self, Freshness};
use fleetpulse_common::protocol::report::{ClusterId, ConfigRequest, HeartbeatReport, RawChecks};
use fleetpulse_common::protocol::{TYP_CONFIG_REQUEST, TYP_HEARTBEAT, jws};

pub use batch::{BatchSettings, BatchVerifier};

use crate::core::cluster::Report;
use crate::core::repeat::Shape;
use crate::fleet::{Admitted, EnrolledKeys, Registry};
use crate::metrics::BatchCounters;
use crate::refusal::Refusal;

/// The pipeline's settings: whom requests must be addressed to, how fresh they must be,
/// and how signatures are verified.
pub struct Admission {
    audience: String,
    freshness: Freshness,
    batch: Option<Arc<BatchVerifier>>,
}

impl Admission {
    /// A pipeline for the hub named `audience`; `batch` batches heartbeat signatures
    /// (`None`: one `verify_strict` each), counting the batches in `counters`.
    pub fn new(
        audience: String,
        freshness: Freshness,
        batch: Option<BatchSettings>,
        counters: BatchCounters,
    ) -> Self {
        Self {
            audience,
            freshness,
            batch: batch.map(|settings| BatchVerifier::new(settings, counters)),
        }
    }

    /// Steps 1 to 8 for a heartbeat to `cluster`.
    pub async fn heartbeat(
        &self,
        registry: &Registry,
        enrolled: Option<&dyn EnrolledKeys>,
        cluster: &ClusterId,
        headers: &HeaderMap,
        body: Body,
    ) -> Result<Admitted<Report>, Refusal> {
        steps::declared_size(headers)?;
        steps::media_type(headers)?;
        let body = steps::read_body(body).await?;
        let unverified = steps::jws_shape(&body, TYP_HEARTBEAT)?;
        let (entry, key) = steps::key(registry, enrolled, cluster, unverified.kid())?;
        let verified = match &self.batch {
            Some(batch) => {
                // The signing input is a part of `body`: shared, not copied.
                let message = body.slice_ref(unverified.signing_input());
                batch.verify(message, *unverified.signature(), key).await
            }
            None => strict(&unverified, &key),
        };
        let payload = steps::signature(&unverified, verified)?;
        let (report, signed_checks, shape) = match steps::repeated(&payload, &entry) {
            Some(repeated) => {
                let (report, signed_checks) = repeated?;
                (report, signed_checks, None)
            }
            None => {
                let signed: HeartbeatReport<RawChecks<'_>> =
                    steps::parse(&payload, "heartbeat report")?;
                let (report, signed_checks, checks_repeated) = steps::checks(signed, &entry)?;
                steps::valid_report(&report)?;
                // Its shape is taken once its check results repeat: a report whose results
                // change every time would pay the shape's pass for nothing.
                let shape = checks_repeated.then(|| Shape::of(&payload)).flatten();
                (report, signed_checks, shape)
            }
        };
        self.claims(&report, cluster)?;
        Ok(Admitted {
            entry,
            kid: unverified.into_kid(),
            claims: report,
            signed_checks: Some(signed_checks),
            shape,
        })
    }

    /// Steps 3 to 8 for a config pull of `cluster`, whose JWS is in `Authorization`.
    pub fn config(
        &self,
        registry: &Registry,
        enrolled: Option<&dyn EnrolledKeys>,
        cluster: &ClusterId,
        headers: &HeaderMap,
    ) -> Result<Admitted<ConfigRequest>, Refusal> {
        let token = steps::authorization(headers)?;
        let unverified = steps::jws_shape(token.as_bytes(), TYP_CONFIG_REQUEST)?;
        let (entry, key) = steps::key(registry, enrolled, cluster, unverified.kid())?;
        let verified = strict(&unverified, &key);
        let payload = steps::signature(&unverified, verified)?;
        let request: ConfigRequest = steps::parse(&payload, "config request")?;
        self.claims(&request, cluster)?;
        Ok(Admitted {
            entry,
            kid: unverified.into_kid(),
            claims: request,
            signed_checks: None,
            shape: None,
        })
    }

    /// Steps 7 and 8: audience, then freshness by the hub's clock.
    fn claims<C: replay::Claims>(&self, claims: &C, cluster: &ClusterId) -> Result<(), Refusal> {
        replay::check_addressee(claims, &self.audience, cluster)?;
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        replay::check_fresh(claims.iat(), claims.exp(), now, self.freshness)?;
        Ok(())
    }
}

fn strict(unverified: &jws::Unverified<'_>, key: &VerifyingKey) -> bool {
    key.verify_strict(unverified.signing_input(), unverified.signature())
        .is_ok()
}

//! [`FailureLimit`]: the per-source limit on authentication failures that the agents'
//! listener and the admin listener share (`serve --failure-limit`). A heartbeat or config
//! pull refused because its JWS, its key or its signature failed, and an admin request
//! answered 401, count against the source address ([`counts`] decides per refusal code).
//! Once a source used up its allowance, until its window ends: on the admin listener its
//! requests are answered 429 `rate_limited`, with `Retry-After`, before any token is looked
//! at (a Kubernetes-mode review is an API call); on the agents' listener its requests that
//! fail are answered 429 instead of their refusal, while those that authenticate are
//! served ([`FailureLimit::failed`]), so a forger sharing an address with agents cannot cut
//! them off. The hub logs a limited source once per window. Successes never count, nor do the refusals an honest agent
//! causes in normal running (a replay after a lost answer, clock skew, a cluster not
//! created yet), so a source whose requests succeed is never limited.
//!
//! The source is the peer's IP address: an IPv6 address by its /64 (what one host is
//! usually given), an IPv4-mapped IPv6 address as the IPv4 address.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use axum::http::HeaderValue;
use axum::http::header::RETRY_AFTER;
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;

use fleetpulse_common::protocol::errors::RejectCode;

use super::{Limit, Limiter};
use crate::refusal::Refusal;

/// Whether a refusal with `code` counts as an authentication failure of its source.
///
/// Counted: what a caller without a valid key or token gets. Not counted: refusals an
/// honest agent causes in normal running or while an operator fixes something (they are
/// answered after its signature verified, or say nothing about who sent them), and the
/// enrolment endpoints' codes (those endpoints have their own limits).
pub fn counts(code: RejectCode) -> bool {
    match code {
        RejectCode::MalformedJws
        | RejectCode::UnknownKey
        | RejectCode::KeyRevoked
        | RejectCode::KeyNotForCluster
        | RejectCode::KeyRetired
        | RejectCode::BadSignature
        | RejectCode::Unauthenticated => true,
        // Limits of the request and normal running: a report at the size limit, a
        // MemberCluster being created, version skew, clock skew, a replay after a lost
        // answer, a hub not ready, a user RBAC does not allow (authenticated).
        RejectCode::BodyTooLarge
        | RejectCode::UnsupportedMediaType
        | RejectCode::UnknownCluster
        | RejectCode::MalformedReport
        | RejectCode::ClusterMismatch
        | RejectCode::WrongAudience
        | RejectCode::ReportExpired
        | RejectCode::Replayed
        | RejectCode::StaleSequence
        | RejectCode::Unavailable
        | RejectCode::Forbidden => false,
        // Enrolment and rotation, limited per source and per token id on their own.
        RejectCode::InvalidToken
        | RejectCode::TokenExpired
        | RejectCode::TokenUsed
        | RejectCode::TokenRevoked
        | RejectCode::TokenNotForCluster
        | RejectCode::RateLimited
        | RejectCode::BadProofOfPossession
        | RejectCode::MalformedEnrolment
        | RejectCode::KeyInUse => false,
    }
}

/// Where a request came from, as the limit counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Source(IpAddr);

impl Source {
    /// The source of a peer at `addr`.
    pub fn of(addr: SocketAddr) -> Source {
        match addr.ip().to_canonical() {
            IpAddr::V6(v6) => {
                let prefix = u128::from(v6) & !u128::from(u64::MAX);
                Source(IpAddr::V6(Ipv6Addr::from(prefix)))
            }
            v4 => Source(v4),
        }
    }

    /// The source of a request, from the peer address the listener attaches (`None` for a
    /// request that did not come through a listener, e.g. an in-process test).
    pub fn of_peer(peer: Option<&ConnectInfo<SocketAddr>>) -> Option<Source> {
        peer.map(|ConnectInfo(addr)| Source::of(*addr))
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// A request refused because its source is over its limit: 429 `rate_limited` with
/// `Retry-After`.
#[derive(Debug)]
pub struct Limited {
    refusal: Refusal,
    retry_after: Duration,
}

impl Limited {
    /// The `result` label of the request metrics.
    pub fn label(&self) -> &'static str {
        self.refusal.label()
    }
}

impl IntoResponse for Limited {
    fn into_response(self) -> Response {
        let seconds = self.retry_after.as_secs() + u64::from(self.retry_after.subsec_nanos() > 0);
        let mut response = self.refusal.into_response();
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        response
    }
}

/// The shared limit: off (`--failure-limit 0`), or counters per source.
#[derive(Debug, Default)]
pub struct FailureLimit {
    limiter: Option<Mutex<Limiter<Source>>>,
    limited_sources: OnceLock<Counter>,
}

impl FailureLimit {
    /// A limit of `limit`, or none.
    pub fn new(limit: Option<Limit>) -> FailureLimit {
        FailureLimit {
            limiter: limit.map(|l| Mutex::new(Limiter::new(l))),
            limited_sources: OnceLock::new(),
        }
    }

    /// Counts each source that uses up its allowance in `counter` from now on (set once,
    /// when the metrics exist).
    pub fn count_limited_sources_in(&self, counter: Counter) {
        let _ = self.limited_sources.set(counter);
    }

    /// The first step of a request from `source`: refused while the source is over its
    /// limit, before anything else is read or verified.
    pub fn check(&self, source: Option<Source>) -> Result<(), Limited> {
        self.check_at(source, Instant::now())
    }

    /// Counts a refusal with `code` against `source` if it is an authentication failure.
    pub fn refused(&self, source: Option<Source>, code: RejectCode) {
        self.refused_at(source, code, Instant::now());
    }

    /// The agents' port, which consults the limit only once a request has failed: counts
    /// the refusal with `code` as [`FailureLimit::refused`] does, and answers 429 instead
    /// of it when `source` was already over its limit. A request that authenticates is
    /// served whatever its source's count, so agents sharing an address with a failing
    /// client (behind NAT, or an ingress controller that proxies every agent's
    /// connection) keep reporting.
    pub fn failed(&self, source: Option<Source>, code: RejectCode) -> Result<(), Limited> {
        self.failed_at(source, code, Instant::now())
    }

    fn failed_at(
        &self,
        source: Option<Source>,
        code: RejectCode,
        now: Instant,
    ) -> Result<(), Limited> {
        if !counts(code) {
            return Ok(());
        }
        let blocked = self.check_at(source, now);
        self.refused_at(source, code, now);
        blocked
    }

    fn check_at(&self, source: Option<Source>, now: Instant) -> Result<(), Limited> {
        let (Some(limiter), Some(source)) = (&self.limiter, source) else {
            return Ok(());
        };
        let limiter = limiter.lock();
        let Some(retry_after) = limiter.blocked_for(&source, now) else {
            return Ok(());
        };
        let Limit { allowed, window } = limiter.limit();
        let message = format!(
            "too many failed authentications from {source} (more than {allowed} in {}s): its \
             requests are refused for {}s. Agents behind one address share this allowance: \
             fix the failing ones (unknown, revoked or wrong keys, bad tokens) or raise the \
             hub's --failure-limit",
            window.as_secs_f64(),
            retry_after.as_secs().max(1),
        );
        Err(Limited {
            refusal: Refusal::new(RejectCode::RateLimited, message),
            retry_after,
        })
    }

    fn refused_at(&self, source: Option<Source>, code: RejectCode, now: Instant) {
        let (Some(limiter), Some(source)) = (&self.limiter, source) else {
            return;
        };
        if !counts(code) {
            return;
        }
        let mut limiter = limiter.lock();
        if !limiter.count(&source, now) {
            return;
        }
        let Limit { allowed, window } = limiter.limit();
        drop(limiter);
        if let Some(counter) = self.limited_sources.get() {
            counter.inc();
        }
        tracing::warn!(
            %source,
            failures = allowed,
            window_seconds = window.as_secs_f64(),
            last = code.as_str(),
            "a source used up its allowance of authentication failures (--failure-limit): its \
             heartbeats, config pulls and admin requests are answered 429 until its window ends"
        );
    }
}

#[cfg(test)]
mod tests;

//! The hub, as the agent sees it: a small trait ([`HubClient`]) with one real
//! implementation over HTTPS ([`HttpHubClient`]), and [`HubError`], which sorts every
//! failed request into "retry soon" ([`HubError::is_transient`]) or "needs a fix", and
//! the [`RetrySchedule`] and [`Attempts`] (retries and hedges) for the first kind, which
//! waits longer where the hub asks to with `Retry-After` ([`retry_after`]).

pub mod attempts;
mod http;
pub mod owner;
pub mod retry;
pub mod retry_after;

use std::future::Future;
use std::time::Duration;

use fleetpulse_common::enrol::message::{RotateAnswer, RotationRequest};
use fleetpulse_common::protocol::errors::{ErrorBody, RejectCode};
use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::{AgentConfig, HeartbeatAnswer};

pub use attempts::Attempts;
pub use http::HttpHubClient;
pub use retry::RetrySchedule;

use crate::metrics::Failure;

/// The requests an agent makes. Implementations must be cancel-safe: dropping a
/// returned future abandons the request.
pub trait HubClient: Send + Sync + 'static {
    /// POSTs a signed heartbeat (a compact JWS) and returns the hub's answer.
    fn send_heartbeat(
        &self,
        jws: String,
        timeout: Duration,
    ) -> impl Future<Output = Result<HeartbeatAnswer, HubError>> + Send;

    /// As [`Self::send_heartbeat`], for a hedged copy: over another connection than the
    /// copy it hedges where the implementation has one.
    fn send_heartbeat_beside(
        &self,
        jws: String,
        timeout: Duration,
    ) -> impl Future<Output = Result<HeartbeatAnswer, HubError>> + Send {
        self.send_heartbeat(jws, timeout)
    }

    /// GETs the cluster's effective config, authorized by a signed config request.
    fn fetch_config(
        &self,
        request_jws: String,
        timeout: Duration,
    ) -> impl Future<Output = Result<AgentConfig, HubError>> + Send;

    /// POSTs a key rotation (signed by the current key, with the new key's proof).
    fn rotate_key(
        &self,
        request: RotationRequest,
        timeout: Duration,
    ) -> impl Future<Output = Result<RotateAnswer, HubError>> + Send;
}

/// A request to the hub that did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// No answer: connection refused or reset, DNS, TLS handshake, timeout.
    #[error("hub at {url} is unreachable: {}", error_chain(source.as_ref()))]
    Unreachable {
        /// The request URL.
        url: String,
        /// The transport error, with its chain.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The hub refused the request with a protocol error body.
    #[error(
        "hub at {url} rejected the request with HTTP {status}, {}: {}",
        .body.code,
        .body.message
    )]
    Rejected {
        /// The request URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The hub's error body.
        body: ErrorBody,
        /// The wait its `Retry-After` asked for (capped; see [`retry_after`]).
        retry_after: Option<Duration>,
    },
    /// A non-success answer without a protocol error body (a proxy or load balancer).
    #[error("hub at {url} answered HTTP {status}: {body}")]
    Status {
        /// The request URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
        /// The wait its `Retry-After` asked for (capped; see [`retry_after`]).
        retry_after: Option<Duration>,
    },
    /// A success status with a body that is not the expected JSON.
    #[error("hub at {url} answered with a body that is not a {expected}: {source}")]
    BadAnswer {
        /// The request URL.
        url: String,
        /// What was expected.
        expected: &'static str,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
}

impl HubError {
    /// Whether retrying soon may succeed: the hub was unreachable, answered 5xx, 408 or
    /// 429, or refused with a transient code ([`RejectCode::is_transient`]). Anything
    /// else needs a fix on one side.
    pub fn is_transient(&self) -> bool {
        match self {
            HubError::Unreachable { .. } => true,
            HubError::Rejected { status, body, .. } => {
                transient_status(*status) || body.code.is_transient()
            }
            HubError::Status { status, .. } => transient_status(*status),
            HubError::BadAnswer { .. } => false,
        }
    }

    /// How the metrics label this failure: whether the hub answered, and the hub's
    /// rejection code or what kind of transport failure it was.
    pub fn failure(&self) -> Failure {
        let reason = match self {
            HubError::Unreachable { .. } => "unreachable",
            HubError::Rejected { body, .. } => body.code.as_str(),
            HubError::Status { .. } => "http_error",
            HubError::BadAnswer { .. } => "bad_answer",
        };
        let answered = !matches!(self, HubError::Unreachable { .. });
        Failure { answered, reason }
    }

    /// How long the hub (or a proxy before it) asked the agent to wait before its next
    /// attempt: the `Retry-After` of a 503 or 429 answer, capped at
    /// [`retry_after::MAX_RETRY_AFTER`]. `None` for any other failure.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            HubError::Rejected {
                status,
                retry_after,
                ..
            }
            | HubError::Status {
                status,
                retry_after,
                ..
            } if retry_after::honoured_for(*status) => {
                retry_after.map(|wait| wait.min(retry_after::MAX_RETRY_AFTER))
            }
            _ => None,
        }
    }

    /// The rejection code, when the hub sent one.
    pub fn code(&self) -> Option<RejectCode> {
        match self {
            HubError::Rejected { body, .. } => Some(body.code),
            _ => None,
        }
    }

    /// For `replayed` / `stale_sequence` rejections: the hub's last accepted position.
    pub fn sequence_conflict(&self) -> Option<Position> {
        match self {
            HubError::Rejected { body, .. }
                if matches!(body.code, RejectCode::Replayed | RejectCode::StaleSequence) =>
            {
                body.last_accepted
            }
            _ => None,
        }
    }
}

/// An error and its sources, joined with `: ` (reqwest's top-level message alone, "error
/// sending request", does not say what went wrong).
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}

fn transient_status(status: u16) -> bool {
    status >= 500 || status == 408 || status == 429
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(code: RejectCode, last: Option<Position>) -> HubError {
        HubError::Rejected {
            url: "u".into(),
            status: code.http_status(),
            body: ErrorBody {
                code,
                message: "m".into(),
                last_accepted: last,
            },
            retry_after: None,
        }
    }

    #[test]
    fn unavailable_and_server_errors_are_transient_misconfiguration_is_not() {
        assert!(rejected(RejectCode::Unavailable, None).is_transient());
        assert!(
            HubError::Status {
                url: "u".into(),
                status: 502,
                body: String::new(),
                retry_after: None,
            }
            .is_transient()
        );
        assert!(
            HubError::Status {
                url: "u".into(),
                status: 429,
                body: String::new(),
                retry_after: None,
            }
            .is_transient()
        );
        for code in RejectCode::ALL
            .into_iter()
            .filter(|c| !matches!(c, RejectCode::Unavailable | RejectCode::RateLimited))
        {
            assert!(!rejected(code, None).is_transient(), "{code}");
        }
        assert!(
            !HubError::Status {
                url: "u".into(),
                status: 404,
                body: String::new(),
                retry_after: None,
            }
            .is_transient()
        );
    }

    #[test]
    fn only_sequence_rejections_carry_a_conflict() {
        let last = Position {
            incarnation: 5,
            seq: 9,
        };
        assert_eq!(
            rejected(RejectCode::Replayed, Some(last)).sequence_conflict(),
            Some(last)
        );
        assert_eq!(
            rejected(RejectCode::StaleSequence, Some(last)).sequence_conflict(),
            Some(last)
        );
        assert_eq!(
            rejected(RejectCode::UnknownKey, Some(last)).sequence_conflict(),
            None
        );
        assert_eq!(
            rejected(RejectCode::StaleSequence, None).sequence_conflict(),
            None
        );
    }

    #[test]
    fn only_a_503_or_429_asks_the_agent_to_wait() {
        let two = Some(Duration::from_secs(2));
        let status = |status, retry_after| HubError::Status {
            url: "u".into(),
            status,
            body: String::new(),
            retry_after,
        };
        assert_eq!(status(503, two).retry_after(), two);
        assert_eq!(status(429, two).retry_after(), two);
        assert_eq!(
            status(502, two).retry_after(),
            None,
            "not for other statuses"
        );
        assert_eq!(status(503, None).retry_after(), None);
        assert_eq!(
            status(503, Some(Duration::from_secs(3600))).retry_after(),
            Some(retry_after::MAX_RETRY_AFTER)
        );
        let mut limited = rejected(RejectCode::RateLimited, None);
        if let HubError::Rejected { retry_after, .. } = &mut limited {
            *retry_after = two;
        }
        assert_eq!(RejectCode::RateLimited.http_status(), 429);
        assert_eq!(limited.retry_after(), two);
    }
}

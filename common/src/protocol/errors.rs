//! Why the hub refused a request: a stable code (for clients, metrics and docs), the HTTP
//! status it maps to, and the JSON error body.

use serde::{Deserialize, Serialize};

use super::replay::Position;

/// A stable rejection code. The string forms are part of the protocol; never rename one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectCode {
    /// The body exceeds [`super::limits::MAX_BODY_BYTES`].
    BodyTooLarge,
    /// The `Content-Type` is not `application/jose`.
    UnsupportedMediaType,
    /// The body is not a well-formed JWS compact serialization with an acceptable header.
    MalformedJws,
    /// No MemberCluster of that namespace/name exists on this hub.
    UnknownCluster,
    /// The `kid` is not a key of any cluster.
    UnknownKey,
    /// The `kid` names a key listed as revoked.
    KeyRevoked,
    /// The `kid` names a key bound to another cluster.
    KeyNotForCluster,
    /// The signature does not verify (strict Ed25519).
    BadSignature,
    /// The signed payload is not a valid report of a supported schema version.
    MalformedReport,
    /// The report names another cluster than the URL.
    ClusterMismatch,
    /// The report is addressed to another hub (`aud`).
    WrongAudience,
    /// `iat`/`exp` are outside the hub's freshness window.
    ReportExpired,
    /// This exact `(incarnation, seq)` was already accepted.
    Replayed,
    /// `(incarnation, seq)` is older than the last accepted one for this key.
    StaleSequence,
    /// The hub is shutting down or not yet ready.
    Unavailable,
    /// Enrolment: no bootstrap token with that id and secret (the same answer for an
    /// unknown id and a wrong secret, so guessing learns nothing).
    InvalidToken,
    /// Enrolment: the token's time to live has passed.
    TokenExpired,
    /// Enrolment: the token was already used (tokens are single-use).
    TokenUsed,
    /// Enrolment: the token was revoked on the hub.
    TokenRevoked,
    /// Enrolment: the token is bound to another cluster (or namespace and name pattern).
    TokenNotForCluster,
    /// Too many refused attempts: at enrolment, from this source or for this token id;
    /// on heartbeats, config pulls and the admin listener, too many authentication
    /// failures from this source (`serve --failure-limit`).
    RateLimited,
    /// Enrolment or rotation: the message is not signed by the key it carries.
    BadProofOfPossession,
    /// Enrolment or rotation: the request body is not a well-formed message.
    MalformedEnrolment,
    /// Enrolment or rotation: the public key is already bound to a cluster.
    KeyInUse,
    /// Rotation: signed by a key that is no longer current (retired after an overlap).
    KeyRetired,
    /// Admin API: no bearer token, or one the hub does not accept.
    Unauthenticated,
    /// Admin API: the token is valid but its user may not read this path.
    Forbidden,
}

impl RejectCode {
    /// The stable string form, as in JSON bodies and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectCode::BodyTooLarge => "body_too_large",
            RejectCode::UnsupportedMediaType => "unsupported_media_type",
            RejectCode::MalformedJws => "malformed_jws",
            RejectCode::UnknownCluster => "unknown_cluster",
            RejectCode::UnknownKey => "unknown_key",
            RejectCode::KeyRevoked => "key_revoked",
            RejectCode::KeyNotForCluster => "key_not_for_cluster",
            RejectCode::BadSignature => "bad_signature",
            RejectCode::MalformedReport => "malformed_report",
            RejectCode::ClusterMismatch => "cluster_mismatch",
            RejectCode::WrongAudience => "wrong_audience",
            RejectCode::ReportExpired => "report_expired",
            RejectCode::Replayed => "replayed",
            RejectCode::StaleSequence => "stale_sequence",
            RejectCode::Unavailable => "unavailable",
            RejectCode::InvalidToken => "invalid_token",
            RejectCode::TokenExpired => "token_expired",
            RejectCode::TokenUsed => "token_used",
            RejectCode::TokenRevoked => "token_revoked",
            RejectCode::TokenNotForCluster => "token_not_for_cluster",
            RejectCode::RateLimited => "rate_limited",
            RejectCode::BadProofOfPossession => "bad_proof_of_possession",
            RejectCode::MalformedEnrolment => "malformed_enrolment",
            RejectCode::KeyInUse => "key_in_use",
            RejectCode::KeyRetired => "key_retired",
            RejectCode::Unauthenticated => "unauthenticated",
            RejectCode::Forbidden => "forbidden",
        }
    }

    /// The HTTP status the hub answers with.
    pub fn http_status(self) -> u16 {
        match self {
            RejectCode::BodyTooLarge => 413,
            RejectCode::UnsupportedMediaType => 415,
            RejectCode::MalformedJws => 400,
            RejectCode::UnknownCluster => 404,
            RejectCode::UnknownKey | RejectCode::BadSignature => 401,
            RejectCode::KeyRevoked | RejectCode::KeyNotForCluster => 403,
            RejectCode::MalformedReport => 422,
            RejectCode::ClusterMismatch => 403,
            RejectCode::WrongAudience => 421,
            RejectCode::ReportExpired => 401,
            RejectCode::Replayed | RejectCode::StaleSequence => 409,
            RejectCode::Unavailable => 503,
            RejectCode::InvalidToken | RejectCode::TokenExpired => 401,
            RejectCode::BadProofOfPossession => 401,
            RejectCode::TokenRevoked | RejectCode::TokenNotForCluster => 403,
            RejectCode::KeyRetired => 403,
            RejectCode::TokenUsed | RejectCode::KeyInUse => 409,
            RejectCode::MalformedEnrolment => 400,
            RejectCode::RateLimited => 429,
            RejectCode::Unauthenticated => 401,
            RejectCode::Forbidden => 403,
        }
    }

    /// Whether retrying the same logical request later may succeed (the agent backs off
    /// and retries); other rejections need a fix on one side and are logged as errors.
    pub fn is_transient(self) -> bool {
        matches!(self, RejectCode::Unavailable | RejectCode::RateLimited)
    }

    /// Every code, for docs and exhaustive tests.
    pub const ALL: [RejectCode; 27] = [
        RejectCode::BodyTooLarge,
        RejectCode::UnsupportedMediaType,
        RejectCode::MalformedJws,
        RejectCode::UnknownCluster,
        RejectCode::UnknownKey,
        RejectCode::KeyRevoked,
        RejectCode::KeyNotForCluster,
        RejectCode::BadSignature,
        RejectCode::MalformedReport,
        RejectCode::ClusterMismatch,
        RejectCode::WrongAudience,
        RejectCode::ReportExpired,
        RejectCode::Replayed,
        RejectCode::StaleSequence,
        RejectCode::Unavailable,
        RejectCode::InvalidToken,
        RejectCode::TokenExpired,
        RejectCode::TokenUsed,
        RejectCode::TokenRevoked,
        RejectCode::TokenNotForCluster,
        RejectCode::RateLimited,
        RejectCode::BadProofOfPossession,
        RejectCode::MalformedEnrolment,
        RejectCode::KeyInUse,
        RejectCode::KeyRetired,
        RejectCode::Unauthenticated,
        RejectCode::Forbidden,
    ];
}

impl std::fmt::Display for RejectCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSON body of every rejection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// The stable code.
    pub code: RejectCode,
    /// A sentence for humans: what failed, for which object, and what to do.
    pub message: String,
    /// For `replayed`/`stale_sequence`: the last accepted position for this key, so an
    /// agent whose incarnation went backwards (clock reset) can start above it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_accepted: Option<Position>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_through_json_as_their_stable_strings() {
        for code in RejectCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<RejectCode>(&json).unwrap(), code);
            assert!((400..600).contains(&code.http_status()));
        }
    }
}

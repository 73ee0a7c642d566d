//! The agent-to-hub protocol (see docs/protocol.md for the wire description).
//!
//! An agent signs a JSON [`report::HeartbeatReport`] as a JWS compact serialization
//! ([`jws`], `alg: EdDSA`, `kid` = the RFC 7638 thumbprint from [`keys`]) and POSTs it to
//! the hub, which verifies it cheapest-first and checks the [`replay`] rules before it
//! touches any state. Rejections carry a stable [`errors::RejectCode`].

pub mod errors;
pub mod jws;
pub mod keys;
pub mod limits;
pub mod replay;
pub mod report;

/// `Content-Type` of a heartbeat body: a JWS in compact serialization (RFC 7515 §9.2.1).
pub const CONTENT_TYPE_JOSE: &str = "application/jose";
/// JWS `typ` of a heartbeat report.
pub const TYP_HEARTBEAT: &str = "fleetpulse-heartbeat+jws";
/// JWS `typ` of a signed config request.
pub const TYP_CONFIG_REQUEST: &str = "fleetpulse-config-request+jws";
/// The authorization scheme of signed GET requests: `Authorization: FleetPulse-JWS <jws>`.
pub const AUTH_SCHEME: &str = "FleetPulse-JWS";

/// Path of the heartbeat endpoint for a cluster.
pub fn heartbeat_path(namespace: &str, name: &str) -> String {
    format!("/v1/clusters/{namespace}/{name}/heartbeat")
}

/// Path of the config endpoint for a cluster.
pub fn config_path(namespace: &str, name: &str) -> String {
    format!("/v1/clusters/{namespace}/{name}/config")
}

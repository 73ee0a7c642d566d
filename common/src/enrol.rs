//! Enrolment: how a cluster's agent gets its key trusted by the hub without anyone pasting
//! a public key, and how it rotates that key later. Everything here is pure (no I/O, time
//! passed in), so the hub and the agent agree on one implementation and the rules are
//! property-tested.
//!
//! - [`token`]: bootstrap tokens as kubeadm's (`abcdef.0123456789abcdef`), what the hub
//!   stores of them (a hash of the secret only) and the rules a presented token must pass.
//! - [`pin`]: the hub CA pin `sha256:HEX` (SHA-256 of the CA certificate's
//!   SubjectPublicKeyInfo, as kubeadm's `--discovery-token-ca-cert-hash`).
//! - [`message`]: the registration message (signed with the new key) and the rotation
//!   message (signed with the current key, with a proof by the new one).
//! - [`keyset`]: a cluster's enrolled keys (active, overlapping, retired, revoked) and the
//!   rules that change them.

pub mod keyset;
pub mod message;
pub mod pin;
pub mod token;

#[cfg(test)]
mod tests;

/// Path of the enrolment endpoint (`POST`, a [`message::RegistrationRequest`]).
pub const ENROL_PATH: &str = "/v1/enrol";
/// Path of the rotation endpoint (`POST`, a [`message::RotationRequest`]).
pub const ROTATE_PATH: &str = "/v1/rotate";
/// JWS `typ` of a registration message.
pub const TYP_REGISTRATION: &str = "fleetpulse-registration+jws";
/// JWS `typ` of a rotation message (signed by the current key).
pub const TYP_ROTATION: &str = "fleetpulse-rotation+jws";
/// JWS `typ` of the new key's proof of possession in a rotation.
pub const TYP_ROTATION_PROOF: &str = "fleetpulse-rotation-proof+jws";

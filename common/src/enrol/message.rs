//! The registration and rotation messages and their verification.
//!
//! A registration is a JWS (`typ` [`TYP_REGISTRATION`]) signed by the agent's new key over
//! a [`Registration`]: the signature is the proof of possession of that key, and the
//! payload carries the bootstrap token, so one message binds the token to the key. The
//! request body also carries the public key in the clear, since a JWS header here only
//! holds `alg`, `kid`, `typ`: the hub checks that `kid` is its thumbprint, verifies, then
//! checks that the signed payload names the same key.
//!
//! A rotation is a JWS (`typ` [`TYP_ROTATION`]) signed by the current key over a
//! [`Rotation`] naming the new public key, plus a second JWS (`typ` [`TYP_ROTATION_PROOF`])
//! signed by the new key over the very same payload bytes.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{SigningKey, VerifyingKey};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use super::{TYP_REGISTRATION, TYP_ROTATION, TYP_ROTATION_PROOF};
use crate::protocol::errors::RejectCode;
use crate::protocol::jws;
use crate::protocol::keys::{self, KeyId};
use crate::protocol::replay::{self, Freshness, Rejection};
use crate::protocol::report::ClusterId;

/// Largest accepted enrolment or rotation body, in bytes.
pub const MAX_ENROL_BODY_BYTES: usize = 8 * 1024;
/// Lifetime the agent gives its messages (`exp - iat`), in seconds.
pub const MESSAGE_LIFETIME_SECS: i64 = 300;

/// The signed payload of a registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registration {
    /// The hub's identity (its `--audience`).
    pub aud: String,
    /// The MemberCluster to enrol.
    pub cluster: ClusterId,
    /// UID of the managed cluster (may be empty).
    #[serde(default)]
    pub cluster_uid: String,
    /// The new public key (base64url, as in `spec.agent.publicKeys`).
    pub public_key: String,
    /// The bootstrap token's id.
    pub token_id: String,
    /// The bootstrap token's secret. It travels only inside TLS to a pinned CA; the hub
    /// compares its hash with the stored one.
    pub token_secret: String,
    /// Issued at, seconds since the epoch.
    pub iat: i64,
    /// Expires at, seconds since the epoch.
    pub exp: i64,
    /// 16 random bytes, base64url: makes every message unique.
    pub nonce: String,
}

/// The body of `POST /v1/enrol`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationRequest {
    /// The new public key, base64url.
    pub public_key: String,
    /// The JWS over the [`Registration`], signed by that key.
    pub registration: String,
}

/// The signed payload of a rotation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rotation {
    /// The hub's identity.
    pub aud: String,
    /// The MemberCluster whose key rotates.
    pub cluster: ClusterId,
    /// Key id of the current key (the signer).
    pub current_key_id: String,
    /// The new public key, base64url.
    pub new_public_key: String,
    /// Issued at, seconds since the epoch.
    pub iat: i64,
    /// Expires at, seconds since the epoch.
    pub exp: i64,
    /// 16 random bytes, base64url; the hub refuses a nonce it has seen.
    pub nonce: String,
}

/// The body of `POST /v1/rotate`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RotationRequest {
    /// The JWS over the [`Rotation`], signed by the current key.
    pub rotation: String,
    /// The JWS over the same payload bytes, signed by the new key.
    pub proof: String,
}

/// Whether the registered key may sign heartbeats yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EnrolState {
    /// Trusted: heartbeats signed with it are accepted.
    Enrolled,
    /// Waiting for `fleetpulse-hub approve`; the agent asks again.
    AwaitingApproval,
}

/// The hub's answer to a registration (`200` when enrolled, `202` while awaiting approval).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrolAnswer {
    /// Where the registration stands.
    pub state: EnrolState,
    /// The registered key's id.
    pub key_id: String,
    /// For the agent's log.
    pub message: String,
}

/// The hub's answer to an accepted rotation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RotateAnswer {
    /// The new key's id, now active.
    pub key_id: String,
    /// The previous key's id, accepted until `overlapUntil`.
    pub previous_key_id: String,
    /// End of the overlap, seconds since the epoch.
    pub overlap_until: i64,
}

pub(crate) fn refuse(code: RejectCode, message: impl Into<String>) -> Rejection {
    Rejection {
        code,
        message: message.into(),
        last_accepted: None,
    }
}

/// A fresh nonce: 16 random bytes, base64url.
pub fn nonce() -> String {
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

fn check_nonce(nonce: &str) -> Result<(), Rejection> {
    match URL_SAFE_NO_PAD.decode(nonce) {
        Ok(bytes) if (16..=64).contains(&bytes.len()) => Ok(()),
        _ => Err(refuse(
            RejectCode::MalformedEnrolment,
            "nonce must be 16 to 64 random bytes, base64url without padding",
        )),
    }
}

/// What a message is checked against: this hub's identity, its clock, its freshness window.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// This hub's `--audience`.
    pub audience: &'a str,
    /// The hub's clock, seconds since the epoch.
    pub now_unix: i64,
    /// The freshness window on `iat`/`exp`.
    pub freshness: Freshness,
}

/// Audience, freshness and nonce shape, shared by both messages.
fn check_envelope(
    aud: &str,
    cluster: &ClusterId,
    (iat, exp): (i64, i64),
    nonce: &str,
    cx: Context<'_>,
) -> Result<(), Rejection> {
    let audience = cx.audience;
    if aud != audience {
        return Err(refuse(
            RejectCode::WrongAudience,
            format!(
                "message for cluster {cluster} is addressed to hub {aud:?}, this hub is \
                 {audience:?}; set the agent's --audience to this hub's"
            ),
        ));
    }
    replay::check_fresh(iat, exp, cx.now_unix, cx.freshness)?;
    check_nonce(nonce)
}

fn verify_jws(compact: &str, typ: &str, key: &VerifyingKey) -> Result<Vec<u8>, Rejection> {
    let parsed = jws::parse(compact.trim(), typ)
        .map_err(|e| refuse(RejectCode::MalformedEnrolment, e.to_string()))?;
    if parsed.kid() != KeyId::of(key).as_str() {
        return Err(refuse(
            RejectCode::BadProofOfPossession,
            format!(
                "the {typ} is signed as key {} but the key it carries is {}",
                parsed.kid(),
                KeyId::of(key)
            ),
        ));
    }
    parsed.verify(key).map_err(|_| {
        refuse(
            RejectCode::BadProofOfPossession,
            format!(
                "the {typ} does not verify with key {}: no proof of possession",
                KeyId::of(key)
            ),
        )
    })
}

fn parse_key(s: &str) -> Result<VerifyingKey, Rejection> {
    keys::parse_public_key(s)
        .map(|key| *key)
        .map_err(|e| refuse(RejectCode::MalformedEnrolment, e.to_string()))
}

impl RegistrationRequest {
    /// Signs `registration` with `key` (whose public half it must carry).
    pub fn sign(key: &SigningKey, registration: &Registration) -> Self {
        let payload = serde_json::to_vec(registration).expect("a registration serializes");
        RegistrationRequest {
            public_key: keys::public_key_string(&key.verifying_key()),
            registration: jws::sign(key, TYP_REGISTRATION, &payload),
        }
    }

    /// Verifies the proof of possession and the envelope (audience, freshness, nonce);
    /// returns the registration and its key. Token rules are the caller's.
    pub fn verify(&self, cx: Context<'_>) -> Result<(Registration, VerifyingKey), Rejection> {
        let key = parse_key(&self.public_key)?;
        let payload = verify_jws(&self.registration, TYP_REGISTRATION, &key)?;
        let r: Registration = serde_json::from_slice(&payload).map_err(|e| {
            refuse(
                RejectCode::MalformedEnrolment,
                format!("signed payload is not a registration: {e}"),
            )
        })?;
        if r.public_key != self.public_key {
            return Err(refuse(
                RejectCode::BadProofOfPossession,
                "the signed registration names another public key than the request",
            ));
        }
        check_envelope(&r.aud, &r.cluster, (r.iat, r.exp), &r.nonce, cx)?;
        Ok((r, key))
    }
}

impl RotationRequest {
    /// Signs `rotation` with the `current` key, and the same bytes with the `new` key.
    pub fn sign(current: &SigningKey, new: &SigningKey, rotation: &Rotation) -> Self {
        let payload = serde_json::to_vec(rotation).expect("a rotation serializes");
        RotationRequest {
            rotation: jws::sign(current, TYP_ROTATION, &payload),
            proof: jws::sign(new, TYP_ROTATION_PROOF, &payload),
        }
    }

    /// The key id the rotation claims to be signed by (not verified yet).
    pub fn signer(&self) -> Result<String, Rejection> {
        jws::parse(self.rotation.trim(), TYP_ROTATION)
            .map(|p| p.kid().to_owned())
            .map_err(|e| refuse(RejectCode::MalformedEnrolment, e.to_string()))
    }

    /// Verifies the current key's signature, the new key's proof over the same bytes and
    /// the envelope; returns the rotation and the new key.
    pub fn verify(
        &self,
        current: &VerifyingKey,
        cx: Context<'_>,
    ) -> Result<(Rotation, VerifyingKey), Rejection> {
        let payload = verify_jws(&self.rotation, TYP_ROTATION, current).map_err(|mut r| {
            if r.code == RejectCode::BadProofOfPossession {
                r.code = RejectCode::BadSignature;
            }
            r
        })?;
        let r: Rotation = serde_json::from_slice(&payload).map_err(|e| {
            refuse(
                RejectCode::MalformedEnrolment,
                format!("signed payload is not a rotation: {e}"),
            )
        })?;
        if r.current_key_id != KeyId::of(current).as_str() {
            return Err(refuse(
                RejectCode::MalformedEnrolment,
                "currentKeyId is not the key that signed the rotation",
            ));
        }
        let new = parse_key(&r.new_public_key)?;
        let proof = verify_jws(&self.proof, TYP_ROTATION_PROOF, &new)?;
        if proof != payload {
            return Err(refuse(
                RejectCode::BadProofOfPossession,
                "the new key's proof signs another payload than the rotation",
            ));
        }
        check_envelope(&r.aud, &r.cluster, (r.iat, r.exp), &r.nonce, cx)?;
        Ok((r, new))
    }
}

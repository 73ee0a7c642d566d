//! A cluster's enrolled keys and the rules that change them. A key is `pending` (registered
//! with a manual-approval token), `active` (signs heartbeats), `overlapping` (the previous
//! key after a rotation, still accepted until a time), `retired` or `revoked` (refused).
//!
//! Every rule either changes the set as it says or returns a rejection and leaves the set
//! exactly as it was (the property tests hold it to that).

use std::collections::BTreeMap;

use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};

use super::message::{Context, RotationRequest, refuse};
use crate::protocol::errors::RejectCode;
use crate::protocol::keys::{self, KeyId, StrongKey};
use crate::protocol::replay::Rejection;
use crate::protocol::report::ClusterId;

/// Where one key stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum KeyState {
    /// Registered, waiting for approval: not accepted yet.
    Pending,
    /// The cluster's current key.
    Active,
    /// The previous key after a rotation, accepted until `until` (seconds since the epoch).
    Overlapping {
        /// End of the overlap.
        until: i64,
    },
    /// No longer accepted (replaced, and its overlap ended).
    Retired,
    /// Revoked by an operator: refused, and never accepted again.
    Revoked,
}

/// One enrolled key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrolledKey {
    /// RFC 7638 thumbprint.
    pub key_id: String,
    /// base64url public key.
    pub public_key: String,
    /// Its state.
    pub state: KeyState,
    /// When it entered that state, seconds since the epoch.
    pub since: i64,
    /// The bootstrap token it was registered with (none for a rotated-in key).
    pub token_id: Option<String>,
}

/// What a key id means for a heartbeat at a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Accept reports signed with this key.
    Accept(StrongKey),
    /// Registered but not approved.
    Pending,
    /// Replaced: its overlap ended.
    Retired,
    /// Revoked by an operator.
    Revoked,
}

/// An accepted rotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rotated {
    /// The new, active key.
    pub key_id: String,
    /// The previous key, overlapping until `overlap_until`.
    pub previous_key_id: String,
    /// End of the overlap.
    pub overlap_until: i64,
    /// `false` when the rotation had already been applied (a retry after a lost answer).
    pub changed: bool,
}

/// The keys of one cluster and the rotation nonces it has seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeySet {
    /// The cluster.
    pub cluster: ClusterId,
    /// Its keys, oldest first.
    pub keys: Vec<EnrolledKey>,
    /// Rotation nonces seen, with the `exp` of their message (kept until it passed).
    pub nonces: BTreeMap<String, i64>,
    /// An operator asked for a new key (`fleetpulse-hub key rotate`); cleared by the next
    /// rotation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rotation_requested: bool,
}

impl KeySet {
    /// An empty set for `cluster`.
    pub fn new(cluster: ClusterId) -> Self {
        KeySet {
            cluster,
            keys: Vec::new(),
            nonces: BTreeMap::new(),
            rotation_requested: false,
        }
    }

    /// A key by id.
    pub fn get(&self, key_id: &str) -> Option<&EnrolledKey> {
        self.keys.iter().find(|k| k.key_id == key_id)
    }

    /// The active key, if any.
    pub fn active(&self) -> Option<&EnrolledKey> {
        self.keys.iter().find(|k| k.state == KeyState::Active)
    }

    /// What `key_id` means at `now`; `None` if the set does not hold it.
    pub fn verdict(&self, key_id: &str, now: i64) -> Option<Verdict> {
        self.verdict_with(key_id, now, parse)
    }

    /// [`Self::verdict`], with the public key of a key that may sign taken from `parsed`
    /// (`None`: it does not parse, so it is refused as revoked), which a caller on the
    /// heartbeat path answers from the keys it parsed once instead of decoding and
    /// decompressing the point for every report. Called only for such a key.
    pub fn verdict_with(
        &self,
        key_id: &str,
        now: i64,
        parsed: impl FnOnce(&EnrolledKey) -> Option<StrongKey>,
    ) -> Option<Verdict> {
        let k = self.get(key_id)?;
        Some(match k.state {
            KeyState::Pending => Verdict::Pending,
            KeyState::Overlapping { until } if until <= now => Verdict::Retired,
            KeyState::Active | KeyState::Overlapping { .. } => match parsed(k) {
                Some(key) => Verdict::Accept(key),
                None => Verdict::Revoked,
            },
            KeyState::Retired => Verdict::Retired,
            KeyState::Revoked => Verdict::Revoked,
        })
    }

    /// Adds `key`, registered with bootstrap token `token_id`: active right away, or
    /// pending until [`Self::approve`]. An active key it replaces is retired at once (a
    /// re-enrolment needs a new token, so the old key is presumed lost). A key the set
    /// already holds is refused.
    pub fn register(
        &mut self,
        key: &VerifyingKey,
        token_id: &str,
        pending: bool,
        now: i64,
    ) -> Result<(), Rejection> {
        let key_id = KeyId::of(key).0;
        if let Some(problem) = keys::published(&keys::public_key_string(key)) {
            return Err(refuse(RejectCode::KeyInUse, problem));
        }
        if self.get(&key_id).is_some() {
            return Err(refuse(
                RejectCode::KeyInUse,
                format!(
                    "key {key_id} is already registered for {}; generate a new key to re-enrol",
                    self.cluster
                ),
            ));
        }
        self.keys.retain(|k| k.state != KeyState::Pending);
        if !pending {
            self.retire_current(now);
        }
        self.keys.push(EnrolledKey {
            key_id,
            public_key: keys::public_key_string(key),
            state: if pending {
                KeyState::Pending
            } else {
                KeyState::Active
            },
            since: now,
            token_id: Some(token_id.to_owned()),
        });
        Ok(())
    }

    /// Approves the pending key; returns its id, or `None` if none is pending.
    pub fn approve(&mut self, now: i64) -> Option<String> {
        let i = self
            .keys
            .iter()
            .position(|k| k.state == KeyState::Pending)?;
        self.retire_current(now);
        let k = &mut self.keys[i];
        k.state = KeyState::Active;
        k.since = now;
        Some(k.key_id.clone())
    }

    /// Revokes `key_id`; returns whether the set holds it. A revoked key stays revoked.
    pub fn revoke(&mut self, key_id: &str, now: i64) -> bool {
        let Some(k) = self.keys.iter_mut().find(|k| k.key_id == key_id) else {
            return false;
        };
        if k.state != KeyState::Revoked {
            k.state = KeyState::Revoked;
            k.since = now;
        }
        true
    }

    /// Retires overlaps that ended and forgets nonces whose messages expired (`skew`
    /// seconds of tolerance, as the freshness check allows).
    pub fn expire(&mut self, now: i64, skew: i64) {
        for k in &mut self.keys {
            if let KeyState::Overlapping { until } = k.state
                && until <= now
            {
                k.state = KeyState::Retired;
                k.since = until;
            }
        }
        self.nonces.retain(|_, exp| *exp >= now - skew);
    }

    /// Applies a rotation: signed by the active key, carrying a new key and its proof of
    /// possession, fresh, with an unseen nonce. The old key overlaps for `overlap_secs`.
    /// The same rotation retried with a new nonce after it was applied (signed by the now
    /// overlapping key, naming the now active key) answers as before and changes nothing.
    pub fn rotate(
        &mut self,
        request: &RotationRequest,
        cx: Context<'_>,
        overlap_secs: i64,
    ) -> Result<Rotated, Rejection> {
        let now = cx.now_unix;
        let signer_id = request.signer()?;
        let cluster = &self.cluster;
        let signer = self.get(&signer_id).ok_or_else(|| {
            refuse(
                RejectCode::UnknownKey,
                format!(
                    "key {signer_id} is not enrolled for {cluster}; rotate with the active key"
                ),
            )
        })?;
        let signer_key = match self.verdict(&signer_id, now) {
            Some(Verdict::Accept(key)) => key,
            Some(Verdict::Revoked) => {
                return Err(refuse(
                    RejectCode::KeyRevoked,
                    format!(
                        "key {signer_id} of {cluster} is revoked; re-enrol with a new bootstrap token"
                    ),
                ));
            }
            Some(Verdict::Pending) => {
                return Err(refuse(
                    RejectCode::UnknownKey,
                    format!("key {signer_id} of {cluster} is not approved yet"),
                ));
            }
            _ => {
                return Err(refuse(
                    RejectCode::KeyRetired,
                    format!("key {signer_id} of {cluster} was replaced; sign with the active key"),
                ));
            }
        };
        let signer_overlapping = matches!(signer.state, KeyState::Overlapping { .. });
        let (rotation, new_key) = request.verify(&signer_key, cx)?;
        if rotation.cluster != *cluster {
            return Err(refuse(
                RejectCode::ClusterMismatch,
                format!(
                    "rotation names {} but key {signer_id} belongs to {cluster}",
                    rotation.cluster
                ),
            ));
        }
        if self.nonces.contains_key(&rotation.nonce) {
            return Err(refuse(
                RejectCode::Replayed,
                format!(
                    "this rotation of {cluster} (nonce {}) was already seen",
                    rotation.nonce
                ),
            ));
        }
        let new_id = KeyId::of(&new_key).0;
        if let Some(existing) = self.get(&new_id) {
            if signer_overlapping
                && existing.state == KeyState::Active
                && let KeyState::Overlapping { until } = signer.state
            {
                return Ok(Rotated {
                    key_id: new_id,
                    previous_key_id: signer_id,
                    overlap_until: until,
                    changed: false,
                });
            }
            return Err(refuse(
                RejectCode::KeyInUse,
                format!("key {new_id} is already known for {cluster}; rotate to a new key"),
            ));
        }
        if signer_overlapping {
            return Err(refuse(
                RejectCode::KeyRetired,
                format!("key {signer_id} of {cluster} was replaced; sign with the active key"),
            ));
        }
        let until = now.saturating_add(overlap_secs);
        for k in &mut self.keys {
            match k.state {
                KeyState::Active => {
                    k.state = KeyState::Overlapping { until };
                    k.since = now;
                }
                KeyState::Overlapping { .. } | KeyState::Pending => {
                    k.state = KeyState::Retired;
                    k.since = now;
                }
                KeyState::Retired | KeyState::Revoked => {}
            }
        }
        self.keys.push(EnrolledKey {
            key_id: new_id.clone(),
            public_key: keys::public_key_string(&new_key),
            state: KeyState::Active,
            since: now,
            token_id: None,
        });
        self.nonces.insert(rotation.nonce, rotation.exp);
        self.rotation_requested = false;
        Ok(Rotated {
            key_id: new_id,
            previous_key_id: signer_id,
            overlap_until: until,
            changed: true,
        })
    }

    fn retire_current(&mut self, now: i64) {
        for k in &mut self.keys {
            if matches!(k.state, KeyState::Active | KeyState::Overlapping { .. }) {
                k.state = KeyState::Retired;
                k.since = now;
            }
        }
    }
}

fn parse(k: &EnrolledKey) -> Option<StrongKey> {
    keys::parse_public_key(&k.public_key).ok()
}

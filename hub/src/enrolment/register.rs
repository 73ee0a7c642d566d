//! The registration and rotation rules applied against the backend. Each runs in order,
//! cheapest first, and writes only once every check passed: rate limits, proof of
//! possession and freshness, the token, the cluster, the key's uniqueness. Then the token
//! is marked used (a conditional write: of two registrations racing for one token, one
//! wins), and the key set written. A registration interrupted between the two writes
//! completes when the agent retries: the used token names the key it enrolled.

use std::time::Instant;

use fleetpulse_common::enrol::keyset::KeyState;
use fleetpulse_common::enrol::message::{
    Context, EnrolAnswer, EnrolState, RegistrationRequest, RotateAnswer, RotationRequest,
};
use fleetpulse_common::enrol::token::{Approval, BootstrapToken, invalid_token_message};
use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::keys::KeyId;
use fleetpulse_common::protocol::replay::Rejection;

use super::Enrolment;
use crate::fleet::Fleet;

fn refuse(code: RejectCode, message: impl Into<String>) -> Rejection {
    Rejection {
        code,
        message: message.into(),
        last_accepted: None,
    }
}

fn internal(e: super::EnrolStoreError) -> Rejection {
    if let super::EnrolStoreError::Conflict { what } = &e {
        tracing::info!(
            what,
            "enrolment record changed meanwhile; the agent retries"
        );
        return refuse(
            RejectCode::Unavailable,
            format!("{what} changed while this request was handled; try again"),
        );
    }
    tracing::error!(error = %e, "enrolment store failed");
    if let super::EnrolStoreError::Kube { what, .. } = &e {
        return refuse(
            RejectCode::Unavailable,
            format!("the hub failed {what}; try again later (the hub's log says why)"),
        );
    }
    refuse(
        RejectCode::Unavailable,
        "the hub cannot read its enrolment store; try again later",
    )
}

impl Enrolment {
    fn context(&self, now_unix: i64) -> Context<'_> {
        Context {
            audience: &self.settings.audience,
            now_unix,
            freshness: self.settings.freshness,
        }
    }

    /// Handles a registration from `source`: answers `Enrolled` or `AwaitingApproval`.
    /// A registration already recorded for the same key and token answers as it stands,
    /// so an agent retrying after a lost answer (or restarted) is not refused.
    pub fn register(
        &self,
        fleet: &Fleet,
        request: &RegistrationRequest,
        source: &str,
        now_unix: i64,
        now: Instant,
    ) -> Result<EnrolAnswer, Rejection> {
        if !self.limits.lock().0.allows(source, now) {
            return Err(rate_limited(&format!("source {source}")));
        }
        // The token id counts only once the registration verified (signed by its key).
        let mut token_id = None;
        let result = self.register_checked(fleet, request, now_unix, now, &mut token_id);
        if let Err(r) = &result
            && r.code != RejectCode::Unavailable
        {
            let mut limits = self.limits.lock();
            limits.0.count(source, now);
            if let Some(id) = token_id {
                limits.1.count(id.as_str(), now);
            }
        }
        result
    }

    fn register_checked(
        &self,
        fleet: &Fleet,
        request: &RegistrationRequest,
        now_unix: i64,
        now: Instant,
        token_id: &mut Option<String>,
    ) -> Result<EnrolAnswer, Rejection> {
        let (registration, key) = request.verify(self.context(now_unix))?;
        let cluster = registration.cluster.clone();
        if !BootstrapToken::is_id(&registration.token_id) {
            return Err(refuse(RejectCode::InvalidToken, invalid_token_message()));
        }
        *token_id = Some(registration.token_id.clone());
        if !self.limits.lock().1.allows(&registration.token_id, now) {
            return Err(rate_limited(&format!(
                "bootstrap token {}",
                registration.token_id
            )));
        }
        let kid = KeyId::of(&key).0;
        let _writing = self.writing.lock();
        let Some(mut token) = self
            .backend
            .token(&registration.token_id)
            .map_err(internal)?
        else {
            return Err(refuse(RejectCode::InvalidToken, invalid_token_message()));
        };
        let keyset = self.backend.keyset(&cluster).map_err(internal)?;
        if token.value.secret_matches(&registration.token_secret) {
            if let Some(k) = keyset
                .value
                .get(&kid)
                .filter(|k| k.token_id.as_deref() == Some(token.value.id.as_str()))
            {
                return match k.state {
                    KeyState::Pending => Ok(pending(&kid, &cluster)),
                    KeyState::Active | KeyState::Overlapping { .. } => {
                        // Approved by the CLI a moment ago: make sure heartbeats see it now.
                        self.cache_put(keyset.value.clone());
                        Ok(enrolled(&kid, &cluster))
                    }
                    KeyState::Retired | KeyState::Revoked => Err(refuse(
                        RejectCode::KeyRevoked,
                        format!(
                            "key {kid} of {cluster} is no longer trusted; re-enrol with a new \
                             key and a new token (`fleetpulse-hub token create --cluster \
                             {cluster}`)"
                        ),
                    )),
                };
            }
            let interrupted = token.value.key_id.as_deref() == Some(kid.as_str())
                && token
                    .value
                    .used
                    .as_ref()
                    .is_some_and(|(_, c)| *c == cluster);
            if interrupted {
                return self.record_key(keyset, &key, &token.value, now_unix);
            }
        }
        token
            .value
            .admit(&registration.token_secret, &cluster, now_unix)
            .map_err(|r| refuse(r.code, r.message))?;
        if fleet.registry().cluster(&cluster).is_none() {
            if !(token.value.creates_cluster && self.backend.creates_clusters()) {
                return Err(refuse(
                    RejectCode::UnknownCluster,
                    format!(
                        "no MemberCluster {cluster} on this hub; create it (the token is not \
                         used up)"
                    ),
                ));
            }
            self.backend
                .create_cluster(&cluster, &token.value.id)
                .map_err(internal)?;
        }
        if fleet.registry().key(&kid).is_some() || self.cache.read().keys.contains_key(&kid) {
            return Err(refuse(
                RejectCode::KeyInUse,
                format!("key {kid} is already bound to a cluster; enrol with a new key"),
            ));
        }
        // Refuses a key the set cannot take before the token is used up.
        keyset
            .value
            .clone()
            .register(&key, &token.value.id, false, now_unix)?;
        token.value.used = Some((now_unix, cluster.clone()));
        token.value.key_id = Some(kid.clone());
        self.backend.put_token(&token).map_err(internal)?;
        self.record_key(keyset, &key, &token.value, now_unix)
    }

    /// Adds the key a used token enrolled to its cluster's key set.
    fn record_key(
        &self,
        mut keyset: super::backend::Versioned<fleetpulse_common::enrol::keyset::KeySet>,
        key: &ed25519_dalek::VerifyingKey,
        token: &fleetpulse_common::enrol::token::TokenRecord,
        now_unix: i64,
    ) -> Result<EnrolAnswer, Rejection> {
        let (kid, cluster) = (KeyId::of(key).0, keyset.value.cluster.clone());
        let manual = token.approval == Approval::Manual;
        keyset.value.register(key, &token.id, manual, now_unix)?;
        self.backend.put_keyset(&keyset).map_err(internal)?;
        self.cache_put(keyset.value);
        tracing::info!(%cluster, key_id = %kid, token_id = %token.id, manual, "agent registered");
        Ok(if manual {
            pending(&kid, &cluster)
        } else {
            enrolled(&kid, &cluster)
        })
    }

    /// Handles a rotation: signed by the cluster's active key, with the new key's proof.
    pub fn rotate(
        &self,
        fleet: &Fleet,
        request: &RotationRequest,
        now_unix: i64,
    ) -> Result<RotateAnswer, Rejection> {
        let signer = request.signer()?;
        let Some(cluster) = self.owner(&signer) else {
            return Err(refuse(
                RejectCode::UnknownKey,
                format!(
                    "key {signer} is not an enrolled key; keys listed in spec.agent.publicKeys \
                     rotate by editing that list"
                ),
            ));
        };
        let _writing = self.writing.lock();
        let mut keyset = self.backend.keyset(&cluster).map_err(internal)?;
        let overlap = i64::try_from(self.settings.overlap.as_secs()).unwrap_or(i64::MAX);
        let mut trial = keyset.value.clone();
        let rotated = trial.rotate(request, self.context(now_unix), overlap)?;
        let new_elsewhere = fleet.registry().key(&rotated.key_id).is_some()
            || self
                .cache
                .read()
                .keys
                .get(&rotated.key_id)
                .is_some_and(|(owner, _)| *owner != cluster);
        if new_elsewhere {
            return Err(refuse(
                RejectCode::KeyInUse,
                format!(
                    "key {} is already bound to a cluster; rotate to a new key",
                    rotated.key_id
                ),
            ));
        }
        if rotated.changed {
            keyset.value = trial;
            self.backend.put_keyset(&keyset).map_err(internal)?;
            self.cache_put(keyset.value);
            tracing::info!(%cluster, key_id = %rotated.key_id, previous = %rotated.previous_key_id, "agent key rotated");
        }
        Ok(RotateAnswer {
            key_id: rotated.key_id,
            previous_key_id: rotated.previous_key_id,
            overlap_until: rotated.overlap_until,
        })
    }
}

fn rate_limited(what: &str) -> Rejection {
    refuse(
        RejectCode::RateLimited,
        format!("too many refused enrolment attempts from {what}; wait a minute and try again"),
    )
}

fn pending(kid: &str, cluster: &fleetpulse_common::protocol::report::ClusterId) -> EnrolAnswer {
    EnrolAnswer {
        state: EnrolState::AwaitingApproval,
        key_id: kid.to_owned(),
        message: format!("registration of {cluster} awaits `fleetpulse-hub approve {cluster}`"),
    }
}

fn enrolled(kid: &str, cluster: &fleetpulse_common::protocol::report::ClusterId) -> EnrolAnswer {
    EnrolAnswer {
        state: EnrolState::Enrolled,
        key_id: kid.to_owned(),
        message: format!("key {kid} is trusted for {cluster}"),
    }
}

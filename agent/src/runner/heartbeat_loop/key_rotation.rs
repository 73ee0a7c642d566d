//! The loop's key rotation ([`crate::rotation`]): between two heartbeats, never instead of
//! one. A rotation the hub refuses is logged with its reason and tried again after
//! [`AFTER_REFUSAL`] (or at the hub's next request); one that could not reach the hub is
//! tried again after the next heartbeat.

use std::time::SystemTime;

use fleetpulse_common::enrol::message::{MESSAGE_LIFETIME_SECS, Rotation, RotationRequest, nonce};
use fleetpulse_common::protocol::keys::{self, KeyId};
use tokio::time::Instant;
use tracing::{error, info, warn};

use super::{Agent, request_timeout};
use crate::hub_client::HubClient;
use crate::report::unix_seconds;
use crate::rotation::AFTER_REFUSAL;

impl<H: HubClient> Agent<H> {
    /// Whether to rotate now: the hub asked, or the schedule says so.
    pub(super) fn rotation_due(&self, asked: bool) -> bool {
        match &self.rotation {
            None => {
                if asked {
                    warn!(cluster = %self.cluster, "the hub asked for a key rotation, but this agent's key is pre-shared (no --bootstrap-token): rotate it in the MemberCluster's spec.agent.publicKeys");
                }
                false
            }
            Some((_, due)) => asked || due.is_some_and(|d| Instant::now() >= d),
        }
    }

    /// At start: a key staged by a rotation that was interrupted is offered again (the
    /// hub answers an applied rotation as it did), then committed.
    pub(super) async fn finish_staged_rotation(&mut self) {
        let Some((settings, _)) = &self.rotation else {
            return;
        };
        match settings.store.staged().await {
            Ok(Some(next)) => {
                info!(cluster = %self.cluster, key_id = %KeyId::of(&next.verifying_key()), "a key rotation was interrupted; offering the staged key again");
                self.send_rotation(next).await;
            }
            Ok(None) => {}
            Err(e) => error!(cluster = %self.cluster, error = %e, "cannot read the staged key"),
        }
    }

    /// Generates a key, stages it, and sends the rotation.
    pub(super) async fn rotate(&mut self) {
        let Some((settings, due)) = &mut self.rotation else {
            return;
        };
        let next = keys::generate();
        if let Err(e) = settings.store.stage(&next).await {
            error!(cluster = %self.cluster, error = %e, "cannot stage a new key; keeping the current one");
            *due = Some(Instant::now() + AFTER_REFUSAL);
            return;
        }
        self.send_rotation(next).await;
    }

    async fn send_rotation(&mut self, next: ed25519_dalek::SigningKey) {
        let now = unix_seconds(SystemTime::now());
        let rotation = Rotation {
            aud: self.audience.clone(),
            cluster: self.cluster.clone(),
            current_key_id: KeyId::of(&self.key.verifying_key()).0,
            new_public_key: keys::public_key_string(&next.verifying_key()),
            iat: now,
            exp: now + MESSAGE_LIFETIME_SECS,
            nonce: nonce(),
        };
        let request = RotationRequest::sign(&self.key, &next, &rotation);
        let answer = self
            .hub
            .rotate_key(request, request_timeout(self.interval))
            .await;
        let Some((settings, due)) = &mut self.rotation else {
            return;
        };
        let cluster = &self.cluster;
        match answer {
            Ok(answer) => {
                if let Err(e) = settings.store.commit(&next).await {
                    // The hub trusts the new key: sign with it; the next start offers the
                    // staged key again and commits then.
                    error!(%cluster, error = %e, "the hub accepted the new key but it could not be saved as the current one");
                }
                self.key = next;
                *due = (!settings.every.is_zero()).then(|| Instant::now() + settings.every);
                self.status.send_modify(|s| s.key_rotations += 1);
                info!(%cluster, key_id = %answer.key_id, previous_key_id = %answer.previous_key_id, overlap_until = answer.overlap_until, "rotated the agent key");
            }
            Err(e) if e.is_transient() => {
                warn!(%cluster, error = %e, "cannot reach the hub to rotate the key; trying again after the next heartbeat");
            }
            Err(e) => {
                error!(%cluster, code = ?e.code(), error = %e, retry_in_seconds = AFTER_REFUSAL.as_secs(), "the hub refused the key rotation; the current key stays");
                *due = Some(Instant::now() + AFTER_REFUSAL);
            }
        }
    }
}

//! Enrolment with a bootstrap token (`run --bootstrap-token TOKEN --hub-ca-hash sha256:HEX`):
//! the agent registers its key with the hub, signed with that key (proof of possession) and
//! carrying the token, over TLS to the pinned CA only; then waits, visibly, while the
//! registration awaits approval, and returns once the hub trusts the key.
//!
//! Registering again with the same key and token answers as the first time did, so an
//! agent restarted with the token still set picks up where it was.

use std::time::Duration;

use fleetpulse_common::enrol::ENROL_PATH;
use fleetpulse_common::enrol::message::{
    EnrolAnswer, EnrolState, MESSAGE_LIFETIME_SECS, Registration, RegistrationRequest, nonce,
};
use fleetpulse_common::enrol::token::BootstrapToken;
use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::keys::{self, KeyId};
use k8s_openapi::jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use crate::AgentOptions;
use crate::error::AgentError;
use crate::hub_client::{HttpHubClient, HubError};

/// How often a pending registration (or an unreachable hub) is tried again.
pub const POLL: Duration = Duration::from_secs(5);
/// Timeout of one registration request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Why the agent could not enrol.
#[derive(Debug, thiserror::Error)]
pub enum EnrolError {
    /// The hub refused the registration; retrying the same token will not help.
    #[error(
        "the hub refused to enrol cluster {cluster} with bootstrap token {token_id} ({code}): \
         {message}"
    )]
    Refused {
        /// The cluster.
        cluster: String,
        /// The token id.
        token_id: String,
        /// The stable code.
        code: RejectCode,
        /// The hub's message (what to do).
        message: String,
    },
    /// The hub answered something that is not the protocol (a proxy, a wrong URL).
    #[error("enrolment of cluster {cluster} failed: {source}")]
    Hub {
        /// The cluster.
        cluster: String,
        /// The failed request.
        #[source]
        source: HubError,
    },
    /// The hub's certificate chain holds no CA matching the pin: nothing was sent.
    #[error(
        "the hub at {hub} is not trusted: {reason}; check --hub-ca-hash against the CA hash          `fleetpulse-hub token create` printed. Nothing was sent"
    )]
    CaMismatch {
        /// The hub URL.
        hub: String,
        /// What the TLS verifier found.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] AgentError),
    /// Stopped (SIGTERM) before the hub trusted the key.
    #[error("stopped before cluster {0} was enrolled")]
    Stopped(String),
}

/// The registration `opts.key` sends with `token` at `now`.
pub fn registration(opts: &AgentOptions, token: &BootstrapToken, now: i64) -> Registration {
    Registration {
        aud: opts.audience.clone(),
        cluster: opts.cluster.clone(),
        cluster_uid: opts.cluster_uid.clone(),
        public_key: keys::public_key_string(&opts.key.verifying_key()),
        token_id: token.id.clone(),
        token_secret: token.secret.clone(),
        iat: now,
        exp: now + MESSAGE_LIFETIME_SECS,
        nonce: nonce(),
    }
}

/// Registers `opts.key` with `token` and waits until the hub trusts it (or `shutdown`).
pub async fn enrol(
    opts: &AgentOptions,
    token: &BootstrapToken,
    shutdown: &CancellationToken,
) -> Result<EnrolAnswer, EnrolError> {
    let client = HttpHubClient::for_agent(opts)?;
    let cluster = opts.cluster.to_string();
    let key_id = KeyId::of(&opts.key.verifying_key());
    let mut told_pending = false;
    loop {
        let request = RegistrationRequest::sign(
            &opts.key,
            &registration(opts, token, Timestamp::now().as_second()),
        );
        match client
            .post_json::<_, EnrolAnswer>(ENROL_PATH, &request, REQUEST_TIMEOUT)
            .await
        {
            Ok((_, answer)) if answer.state == EnrolState::Enrolled => {
                tracing::info!(%cluster, key_id = %answer.key_id, "enrolled: the hub trusts this agent's key");
                return Ok(answer);
            }
            Ok((_, answer)) => {
                if !told_pending {
                    tracing::warn!(
                        %cluster, key_id = %key_id, token_id = %token.id,
                        "registration awaits approval: on the hub run `fleetpulse-hub approve {cluster}`; {}",
                        answer.message
                    );
                    told_pending = true;
                }
            }
            Err(HubError::Rejected { body, .. }) if !body.code.is_transient() => {
                return Err(EnrolError::Refused {
                    cluster,
                    token_id: token.id.clone(),
                    code: body.code,
                    message: body.message,
                });
            }
            Err(e) if pin_mismatch(&e).is_some() => {
                return Err(EnrolError::CaMismatch {
                    hub: opts.hub.to_string(),
                    reason: pin_mismatch(&e).unwrap_or_default(),
                });
            }
            Err(e) if e.is_transient() => {
                tracing::warn!(%cluster, error = %e, "cannot reach the hub to enrol; trying again");
            }
            Err(source) => return Err(EnrolError::Hub { cluster, source }),
        }
        tokio::select! {
            () = shutdown.cancelled() => return Err(EnrolError::Stopped(cluster)),
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

/// The pinned verifier's refusal, if that is why the request failed. The TLS stack wraps
/// rustls' error in I/O errors whose `source()` skips it, so the chain is searched for the
/// verifier's own words (its message names `--hub-ca-hash`, which nothing else does).
fn pin_mismatch(e: &HubError) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        let text = err.to_string();
        if let Some(at) = text.find("the hub's certificate chain holds no CA") {
            return Some(text[at..].to_owned());
        }
        source = err.source();
    }
    None
}

//! The heartbeat loop and the two ways to run it.
//!
//! - [`run`] runs one agent until its `shutdown` token is cancelled (the binary's way).
//! - [`spawn`] starts one on the current Tokio runtime and returns an [`AgentHandle`] to
//!   observe it ([`AgentHandle::status`], [`AgentHandle::wait_for`]) and stop it
//!   ([`AgentHandle::stop`]); several can run side by side in one process (the tests
//!   crate's way). Restarting an agent is stopping it and spawning it again with the same
//!   options: the new one starts a new incarnation.
//!
//! The loop's rules:
//! - Every attempt builds and signs a new report (next seq, fresh `iat`), except a hedge.
//! - Transient failures ([`HubError::is_transient`]) are retried with jittered
//!   exponential backoff ([`retry_backoff`]) until a report is accepted or the agent
//!   stops; the first failure in a row and every tenth is logged at warn, the rest at
//!   debug. A 503 or 429 with `Retry-After` holds the next attempt back at least that
//!   long, at most 5 minutes ([`HubError::retry_after`]).
//! - A retry left unanswered for a third of the request timeout is hedged: the same
//!   signed report goes out beside it (two at most) and the first answer wins
//!   ([`Attempts`]). The copy that reaches the hub second is refused as `replayed`,
//!   which the agent recognises as its own and ignores.
//! - A `replayed` / `stale_sequence` rejection whose `lastAccepted` is not below our
//!   incarnation moves the incarnation above it, resets seq to 1 and resends at once,
//!   once per heartbeat.
//! - Other rejections need a fix (the hub's message says which); they are logged at error
//!   and the next attempt waits a full interval.
//! - After an accepted report the agent adopts the hub's interval, pulls the config when
//!   the hub's generation differs from the applied one (a failed pull is retried after the
//!   next heartbeat), and sends the next report one interval after the accepted attempt
//!   was sent (so the hub sees one report per interval however slow the answers are).
//!
//! [`HubError::is_transient`]: crate::hub_client::HubError::is_transient
//! [`HubError::retry_after`]: crate::hub_client::HubError::retry_after
//! [`Attempts`]: crate::hub_client::Attempts

mod handle;
mod heartbeat_loop;
mod status;

#[cfg(test)]
mod fake_hub_tests;
#[cfg(test)]
mod http_tests;
#[cfg(test)]
mod tls_tests;

use tokio_util::sync::CancellationToken;

use crate::error::AgentError;
use crate::hub_client::{HttpHubClient, HubClient};
use crate::options::AgentOptions;

pub use handle::AgentHandle;
pub use heartbeat_loop::{request_timeout, retry_backoff};
pub use status::AgentStatus;

use heartbeat_loop::Agent;

/// Runs an agent until `shutdown` is cancelled, then returns promptly (an in-flight
/// request or backoff sleep is abandoned). Fails only if the options are unusable: an
/// `http://` hub without `allow_insecure_http`, a bad CA bundle, no system roots.
pub async fn run(opts: AgentOptions, shutdown: CancellationToken) -> Result<(), AgentError> {
    let hub = HttpHubClient::for_agent(&opts)?;
    let (agent, _status) = Agent::new(hub, opts);
    agent.run(shutdown).await;
    Ok(())
}

/// Starts an agent on the current Tokio runtime (panics outside one) and returns its
/// handle. Dropping the handle stops the agent too.
pub fn spawn(opts: AgentOptions) -> Result<AgentHandle, AgentError> {
    let hub = HttpHubClient::for_agent(&opts)?;
    Ok(spawn_with(hub, opts))
}

/// Starts an agent talking to `hub` (any [`HubClient`]) and returns its handle.
pub(crate) fn spawn_with<H: HubClient>(hub: H, opts: AgentOptions) -> AgentHandle {
    let cluster = opts.cluster.clone();
    let (agent, status) = Agent::new(hub, opts);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(agent.run(shutdown.clone()));
    AgentHandle::new(cluster, status, shutdown, task)
}

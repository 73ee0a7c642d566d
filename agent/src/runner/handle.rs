//! [`AgentHandle`]: a spawned agent, to observe and stop.

use std::time::Duration;

use fleetpulse_common::protocol::report::ClusterId;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::AgentStatus;
use crate::error::AgentError;

/// A running agent started by [`super::spawn`]. Dropping it stops the agent (without
/// waiting); [`AgentHandle::stop`] stops it and waits until it has.
#[derive(Debug)]
pub struct AgentHandle {
    cluster: ClusterId,
    status: watch::Receiver<AgentStatus>,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl AgentHandle {
    pub(super) fn new(
        cluster: ClusterId,
        status: watch::Receiver<AgentStatus>,
        shutdown: CancellationToken,
        task: JoinHandle<()>,
    ) -> Self {
        Self {
            cluster,
            status,
            shutdown,
            task,
        }
    }

    /// The cluster the agent reports for.
    pub fn cluster(&self) -> &ClusterId {
        &self.cluster
    }

    /// The latest status.
    pub fn status(&self) -> AgentStatus {
        self.status.borrow().clone()
    }

    /// A receiver that sees every status change.
    pub fn watch(&self) -> watch::Receiver<AgentStatus> {
        self.status.clone()
    }

    /// Waits until `condition` holds for the status, at most `timeout`. Returns the
    /// status that satisfied it, or on timeout (or if the agent ended) the last status.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        mut condition: impl FnMut(&AgentStatus) -> bool,
    ) -> Result<AgentStatus, AgentStatus> {
        let mut rx = self.status.clone();
        match tokio::time::timeout(timeout, rx.wait_for(|s| condition(s))).await {
            Ok(Ok(status)) => Ok(status.clone()),
            _ => Err(self.status()),
        }
    }

    /// Whether the agent task has ended (it only does when stopped, or if it panicked).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops the agent, waits until it has stopped and returns its final status.
    pub async fn stop(mut self) -> Result<AgentStatus, AgentError> {
        self.shutdown.cancel();
        let ended = (&mut self.task).await;
        let status = self.status();
        ended.map(|()| status).map_err(|e| AgentError::Task {
            cluster: self.cluster.to_string(),
            reason: e.to_string(),
        })
    }
}

impl Drop for AgentHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

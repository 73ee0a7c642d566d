//! Leader election over a `coordination.k8s.io/v1` Lease, with `kube-lease-manager`: of the
//! hub replicas sharing a management cluster, one leads (watches, decides, writes status)
//! and the others stand by, serving only probes until the lease is free.
//!
//! A leader that loses the lease stops at once without writing anything more (the process
//! exits and Kubernetes restarts it as a standby), so two replicas never write status
//! together for longer than the lease's renewal margin. A leader that stops gracefully
//! writes its last state first and then releases the lease, so a standby takes over
//! without waiting for the lease to expire.

use std::time::Duration;

use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Which Lease the replicas share and who this replica is.
#[derive(Clone, Debug)]
pub struct LeaderSettings {
    /// Namespace of the Lease (the hub's own namespace).
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's identity (its Pod name), recorded as the Lease holder.
    pub identity: String,
    /// How long the lease lasts without renewal; the leader renews it when a third of
    /// this is left. A standby takes over after at most this long if the leader dies.
    pub duration: Duration,
}

/// Leader election failed.
#[derive(Debug, thiserror::Error)]
#[error(
    "leader election on Lease {namespace}/{name}: {source}; check the hub may get, create and patch Leases in {namespace}"
)]
pub struct LeaderError {
    namespace: String,
    name: String,
    #[source]
    source: LeaseManagerError,
}

/// This replica holds the lease (renewed in the background until released or lost).
pub struct Leadership {
    state: watch::Receiver<bool>,
    task: JoinHandle<Result<LeaseManager, LeaseManagerError>>,
}

/// Waits until this replica holds the lease.
pub async fn acquire(
    client: kube::Client,
    settings: &LeaderSettings,
) -> Result<Leadership, LeaderError> {
    let error = |source| LeaderError {
        namespace: settings.namespace.clone(),
        name: settings.name.clone(),
        source,
    };
    let duration = settings.duration.as_secs().max(3);
    let manager = LeaseManagerBuilder::new(client, &settings.name)
        .with_namespace(&settings.namespace)
        .with_identity(&settings.identity)
        .with_duration(duration)
        .with_grace((duration / 3).max(1))
        .build()
        .await
        .map_err(error)?;
    let (mut state, task) = manager.watch().await;
    tracing::info!(lease = %settings.name, identity = %settings.identity, "standing by until this replica holds the lease");
    while !*state.borrow_and_update() {
        if state.changed().await.is_err() {
            let failure = match task.await {
                Ok(Err(e)) => e,
                _ => LeaseManagerError::InconsistentState("the lease manager stopped".into()),
            };
            return Err(error(failure));
        }
    }
    tracing::info!(lease = %settings.name, identity = %settings.identity, "this replica leads");
    Ok(Leadership { state, task })
}

impl Leadership {
    /// Resolves when another replica took the lease (or the lease manager stopped).
    pub async fn lost(&mut self) {
        loop {
            if self.state.changed().await.is_err() || !*self.state.borrow_and_update() {
                return;
            }
        }
    }

    /// Releases the lease so a standby takes over at once; waits up to five seconds.
    pub async fn release(self) {
        drop(self.state);
        match tokio::time::timeout(Duration::from_secs(5), self.task).await {
            Ok(Ok(Ok(_))) => tracing::info!("lease released"),
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %e, "could not release the lease; a standby takes over when it expires")
            }
            _ => {
                tracing::warn!("lease release did not finish; a standby takes over when it expires")
            }
        }
    }
}

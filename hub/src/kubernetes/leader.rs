//! Leader election over a `coordination.k8s.io/v1` Lease, with `kube-lease-manager`: of the
//! hub replicas sharing a management cluster, one leads (watches, decides, writes status)
//! and the others stand by, serving only probes until the lease is free.
//!
//! When the replica knows its own Pod, the leader labels it `fleetpulse.io/leader=true`
//! (and every replica removes the label from itself while it stands by), so a Service
//! selecting that label routes agents to the leader only, while every replica stays
//! ready and a rolling update proceeds as usual.
//!
//! A leader that loses the lease stops at once without writing anything more (the process
//! exits and Kubernetes restarts it as a standby), so two replicas never write status
//! together for longer than the lease's renewal margin. A leader that stops gracefully
//! writes its last state first and then releases the lease, so a standby takes over
//! without waiting for the lease to expire.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
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
    /// This replica's own Pod (namespace, name), labelled [`LEADER_LABEL`] while it leads.
    pub pod: Option<(String, String)>,
}

/// The label of the leader's Pod, for a Service selecting the leader.
pub const LEADER_LABEL: &str = "fleetpulse.io/leader";

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
    client: kube::Client,
    pod: Option<(String, String)>,
}

/// Sets (or removes) [`LEADER_LABEL`] on the replica's own Pod. A failure is logged: while
/// the leader's Pod lacks the label, a Service selecting it routes no agent to any hub.
async fn label_pod(client: &kube::Client, pod: &Option<(String, String)>, leading: bool) {
    let Some((namespace, name)) = pod else {
        return;
    };
    let value = if leading {
        serde_json::json!("true")
    } else {
        serde_json::Value::Null
    };
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {LEADER_LABEL: value}}}));
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    match api.patch(name, &PatchParams::default(), &patch).await {
        Ok(_) => tracing::info!(pod = %name, leading, "leader label of this replica's Pod set"),
        Err(e) => tracing::error!(pod = %name, leading, error = %e,
            "cannot label this replica's Pod; a Service selecting {LEADER_LABEL}=true will not route agents to it: check the hub may patch Pods in {namespace}"),
    }
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
    let manager = LeaseManagerBuilder::new(client.clone(), &settings.name)
        .with_namespace(&settings.namespace)
        .with_identity(&settings.identity)
        .with_duration(duration)
        .with_grace((duration / 3).max(1))
        .build()
        .await
        .map_err(error)?;
    // A replica restarted in the same Pod may still carry the label of its former life.
    label_pod(&client, &settings.pod, false).await;
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
    label_pod(&client, &settings.pod, true).await;
    Ok(Leadership {
        state,
        task,
        client,
        pod: settings.pod.clone(),
    })
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

    /// Removes the leader label from this replica's Pod (when it lost the lease).
    pub async fn unlabel(&self) {
        label_pod(&self.client, &self.pod, false).await;
    }

    /// Removes the leader label, then releases the lease so a standby takes over at once;
    /// waits up to five seconds.
    pub async fn release(self) {
        self.unlabel().await;
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

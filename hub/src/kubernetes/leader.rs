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
//! together for longer than the lease's renewal margin. It is fenced as client-go's leader
//! election fences: the leader renews every fifth of the lease duration and checks the
//! Lease every second (at most); when it has not seen its own renewal land within the
//! renew deadline (two thirds of the duration: 10 s of the default 15 s), because the API
//! server refuses the renewals or cannot be reached, it counts the lease as lost and stops
//! before the lease can expire for the standbys. A leader that stops gracefully
//! writes its last state first and then releases the lease, so a standby takes over
//! without waiting for the lease to expire.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
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
    /// How long the lease lasts without renewal; the leader renews it every fifth of this
    /// and stops leading when a renewal has not landed within [`Self::renew_deadline`]. A
    /// standby takes over after at most this long if the leader dies.
    pub duration: Duration,
    /// This replica's own Pod (namespace, name), labelled [`LEADER_LABEL`] while it leads.
    pub pod: Option<(String, String)>,
}

impl LeaderSettings {
    /// How long the leader goes on leading without seeing its renewal land: two thirds of
    /// the lease duration (client-go's default ratio, 10 s of 15 s), so it stops writing
    /// a third of the duration before a standby may take the lease.
    pub fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }

    /// How often the leader renews: every fifth of the lease duration (at least 1 s), so
    /// a couple of failed renewals are retried before the renew deadline.
    fn renew_every(&self) -> u64 {
        (self.duration.as_secs() / 5).max(1)
    }

    /// How often the leader checks that its renewals land: a tenth of the lease duration,
    /// between 100 ms and 1 s.
    fn fence_poll(&self) -> Duration {
        (self.duration / 10).clamp(Duration::from_millis(100), Duration::from_secs(1))
    }
}

/// Why this replica stopped leading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lost {
    /// Another replica holds the lease (or the lease manager stopped).
    TakenOver,
    /// No renewal of this replica's lease landed within the renew deadline.
    NotRenewed {
        /// The renew deadline that passed.
        deadline: Duration,
    },
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::TakenOver => f.write_str("another hub replica took the lease"),
            Lost::NotRenewed { deadline } => write!(
                f,
                "the lease was not renewed within its renew deadline of {}s (the API server \
                 refused or did not answer), so a standby may take it soon",
                deadline.as_secs_f64()
            ),
        }
    }
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
    fence: Fence,
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
        .with_grace(duration - settings.renew_every().min(duration - 1))
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
    let leases: Api<Lease> = Api::namespaced(client.clone(), &settings.namespace);
    let fence = Fence(tokio::spawn(fence(leases, settings.clone())));
    Ok(Leadership {
        state,
        task,
        fence,
        client,
        pod: settings.pod.clone(),
    })
}

/// The fencing task, stopped with the [`Leadership`] that owns it.
struct Fence(JoinHandle<Lost>);

impl Drop for Fence {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Reads the Lease every [`LeaderSettings::fence_poll`] and resolves when this replica's
/// renewals stopped landing for longer than the renew deadline (or another holds it). A
/// failed read counts as no renewal seen: a partitioned leader cannot tell either.
async fn fence(leases: Api<Lease>, settings: LeaderSettings) -> Lost {
    let deadline = settings.renew_deadline();
    let mut renewed = tokio::time::Instant::now();
    let mut seen = None;
    loop {
        tokio::time::sleep(settings.fence_poll()).await;
        // A read that hangs (a partition) is cut off at the deadline.
        let left = deadline.saturating_sub(renewed.elapsed());
        let read = leases.get(&settings.name);
        match tokio::time::timeout(left.max(Duration::from_millis(100)), read).await {
            Ok(Ok(lease)) => {
                let spec = lease.spec.unwrap_or_default();
                if spec.holder_identity.as_deref() != Some(settings.identity.as_str()) {
                    return Lost::TakenOver;
                }
                if spec.renew_time != seen {
                    seen = spec.renew_time;
                    renewed = tokio::time::Instant::now();
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(lease = %settings.name, error = %e, "cannot read the lease to check this replica's renewals")
            }
            Err(_) => {
                tracing::warn!(lease = %settings.name, "the lease read did not answer before the renew deadline")
            }
        }
        if renewed.elapsed() > deadline {
            return Lost::NotRenewed { deadline };
        }
    }
}

impl Leadership {
    /// Resolves when another replica took the lease (or the lease manager stopped), or
    /// when this replica's renewals did not land within the renew deadline: from then on
    /// it must not write.
    pub async fn lost(&mut self) -> Lost {
        let taken = async {
            loop {
                if self.state.changed().await.is_err() || !*self.state.borrow_and_update() {
                    return Lost::TakenOver;
                }
            }
        };
        tokio::select! {
            lost = taken => lost,
            fenced = &mut self.fence.0 => fenced.unwrap_or(Lost::TakenOver),
        }
    }

    /// Removes the leader label from this replica's Pod (when it lost the lease).
    pub async fn unlabel(&self) {
        label_pod(&self.client, &self.pod, false).await;
    }

    /// Removes the leader label, then releases the lease so a standby takes over at once;
    /// waits up to five seconds.
    pub async fn release(self) {
        self.fence.0.abort();
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

//! Starting a replica that shares the fleet with others: the shard Lease loop, with the
//! take-over of a shard's state before this replica acts on it, the detector and the
//! store limited to the shards it owns, and the gate that sends agents to the owner of
//! their cluster's shard.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::Router;
use k8s_openapi::jiff::Timestamp;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::fleet::Fleet;
use crate::kubernetes::shard_leases::{self, OnTake, Shards};
use crate::kubernetes::store::hub_state::{Sharded, read_shard};
use crate::shards::ShardSettings;

/// The shards this replica owns, filled in once the Lease loop starts (the store is
/// built before the fleet, the loop after it).
#[derive(Clone, Default)]
pub(super) struct Cell(Arc<OnceLock<Shards>>);

impl Cell {
    /// What the store asks: whether this replica owns shard `k` now.
    pub(super) fn sharded(&self, shards: u32) -> Sharded {
        let cell = self.0.clone();
        Sharded {
            shards,
            owns: Arc::new(move |k| cell.get().is_some_and(|s| s.owns(k))),
        }
    }
}

/// The running Lease loop, stopped after the last flush (so the state of every shard
/// this replica held is written before it releases them).
pub(super) struct Running {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Running {
    /// Releases every shard this replica holds.
    pub(super) async fn release(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Starts the Lease loop for `fleet`; agents reach this replica at `settings.url`, or
/// (when it is unset and `addr` is a concrete address) at `addr`.
pub(super) fn start(
    client: kube::Client,
    mut settings: ShardSettings,
    addr: SocketAddr,
    tls: bool,
    fleet: &Arc<Fleet>,
    cell: &Cell,
) -> (Shards, Running) {
    if settings.url.is_none() && !addr.ip().is_unspecified() {
        let scheme = if tls { "https" } else { "http" };
        settings.url = Some(format!("{scheme}://{addr}"));
    }
    if settings.url.is_none() {
        tracing::warn!(%addr, "this replica has no URL to give agents of its shards: set the URL agents reach it at");
    }
    let on_take: OnTake = {
        let (client, fleet) = (client.clone(), fleet.clone());
        let (namespace, count) = (settings.namespace.clone(), settings.shards);
        Arc::new(move |k| {
            let (client, fleet, namespace) = (client.clone(), fleet.clone(), namespace.clone());
            Box::pin(async move {
                match read_shard(client, &namespace, count, k).await {
                    Ok(state) => {
                        let clusters = state.positions.len();
                        fleet.take_over(
                            state.positions,
                            state.heard,
                            Instant::now(),
                            Timestamp::now(),
                        );
                        tracing::info!(shard = k, clusters, "took over the shard's state");
                    }
                    Err(e) => tracing::warn!(shard = k, error = %e,
                        "acting on the shard with the positions this replica had; its clusters get a fresh grace period"),
                }
            })
        })
    };
    let stop = CancellationToken::new();
    let (shards, task) = shard_leases::start_with(client, settings, Some(on_take), stop.clone());
    let _ = cell.0.set(shards.clone());
    fleet.use_ownership(Arc::new(shards.clone()));
    (shards, Running { stop, task })
}

/// `app` behind the shard gate.
pub(super) fn gate(app: Router, shards: Shards) -> Router {
    app.layer(axum::middleware::from_fn_with_state(
        shards,
        super::shard_gate::gate,
    ))
}

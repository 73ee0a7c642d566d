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
        let (client, fleet, cell) = (client.clone(), fleet.clone(), cell.clone());
        let (namespace, count) = (settings.namespace.clone(), settings.shards);
        let deadline = settings.renew_deadline();
        Arc::new(move |k| {
            let (client, fleet, namespace) = (client.clone(), fleet.clone(), namespace.clone());
            let cell = cell.clone();
            Box::pin(async move {
                if k == 0 {
                    // The owner of shard 0 writes the sets: it goes on from what the last
                    // one wrote, and evaluates once it owns the shard.
                    fleet.adopt_written_set_statuses();
                    let fleet = fleet.clone();
                    tokio::spawn(async move {
                        let owned = async {
                            while !cell.0.get().is_some_and(|s| s.owns(0)) {
                                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                            }
                        };
                        if tokio::time::timeout(deadline, owned).await.is_ok() {
                            fleet.evaluate_sets(Timestamp::now());
                        }
                    });
                }
                let in_shard =
                    move |id: &crate::ids::ClusterId| crate::ids::shard_of(id, count) == k;
                fleet.take_over_health(in_shard, Timestamp::now());
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

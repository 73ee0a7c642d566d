//! The shard Leases' loop: every [`ShardSettings::renew_every`] this replica lists the
//! shard Leases (one request), runs the pure balancer over what it sees, and writes what
//! it decided (renewals, takes, releases, a request for a shard), each write guarded by
//! the Lease's `resourceVersion`, so two replicas racing for one shard cannot both win:
//! the API server (etcd) arbitrates, as it does for client-go's leader election.
//!
//! The rules are the leader Lease's ([`super::leader`]): a shard Lease is expired for the
//! other replicas once they have seen it unchanged for its whole duration (measured on
//! their own clocks, so clock skew does not matter), and its holder acts on the shard only
//! while its last renewal landed within the renew deadline (two thirds of the duration):
//! a replica partitioned from the API server stops acting on its shards a third of a
//! duration before any other replica may take them. [`Shards::owns`] reads that deadline
//! against the clock at every call, so it holds even when the loop itself is stuck.
//!
//! A shard is given up in this order: this replica stops acting on it, then writes the
//! release (and the shard's new holder may take it at once). On a graceful stop every
//! held shard is released. A shard is taken in the reverse order: the Lease is written,
//! then the take-over hook runs (reading what the last owner flushed of the shard, see
//! [`OnTake`]), and only then does this replica act on it.

mod lease;
mod view;

pub use view::{Owner, Shards};

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, PostParams};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::shards::{LEASE_LABEL, ShardSettings, balance, lease_name};
use lease::{Observed, Write};

/// What runs when this replica has taken shard `k`'s Lease, before it acts on the shard:
/// taking over the state the last owner flushed. It has half the renew deadline; if it
/// takes longer this replica acts on the shard without it (and says so in the log).
pub type OnTake = Arc<dyn Fn(u32) -> BoxFuture<'static, ()> + Send + Sync>;

/// Starts the loop; the returned [`Shards`] says which shards this replica owns. The task
/// ends (releasing every shard it holds) when `shutdown` is cancelled.
pub fn start(
    client: kube::Client,
    settings: ShardSettings,
    shutdown: CancellationToken,
) -> (Shards, JoinHandle<()>) {
    start_with(client, settings, None, shutdown)
}

/// [`start`], running `on_take` for every shard taken before acting on it.
pub fn start_with(
    client: kube::Client,
    settings: ShardSettings,
    on_take: Option<OnTake>,
    shutdown: CancellationToken,
) -> (Shards, JoinHandle<()>) {
    let shards = Shards::new(&settings);
    let task = tokio::spawn(run(client, settings, shards.clone(), on_take, shutdown));
    (shards, task)
}

async fn run(
    client: kube::Client,
    settings: ShardSettings,
    shards: Shards,
    on_take: Option<OnTake>,
    shutdown: CancellationToken,
) {
    let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
    let mut observed = Observed::new(settings.shards);
    tracing::info!(shards = settings.shards, identity = %settings.identity,
        lease_seconds = settings.duration.as_secs(), "sharing the fleet through shard Leases");
    loop {
        round(&api, &settings, &shards, &mut observed, on_take.as_ref()).await;
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(settings.renew_every()) => {}
        }
    }
    release_all(&api, &settings, &shards, &observed).await;
}

/// Lists, plans and writes once.
async fn round(
    api: &Api<Lease>,
    settings: &ShardSettings,
    shards: &Shards,
    observed: &mut Observed,
    on_take: Option<&OnTake>,
) {
    let deadline = settings.renew_deadline();
    let list = ListParams::default().labels(&format!("{LEASE_LABEL}=true"));
    let listed = match tokio::time::timeout(deadline, api.list(&list)).await {
        Ok(Ok(list)) => list.items,
        Ok(Err(e)) => {
            tracing::warn!(namespace = %settings.namespace, error = %e,
                "cannot list the shard Leases; check the hub may list Leases in its namespace");
            return;
        }
        Err(_) => {
            tracing::warn!(namespace = %settings.namespace, "listing the shard Leases did not answer");
            return;
        }
    };
    let seen = observed.update(listed, tokio::time::Instant::now());
    shards.record_holders(observed);
    let plan = balance::plan(&settings.identity, &seen);
    for &k in &plan.release {
        // Stop acting first: from here on this replica judges nothing of the shard.
        shards.drop_shard(k);
    }
    let mut writes: Vec<(u32, Write)> = Vec::new();
    writes.extend(plan.renew.iter().map(|&k| (k, Write::Renew)));
    writes.extend(plan.take.iter().map(|&k| (k, Write::Take)));
    writes.extend(plan.release.iter().map(|&k| (k, Write::Release)));
    writes.extend(plan.request.map(|k| (k, Write::Request)));
    for (k, write) in writes {
        let sent = tokio::time::Instant::now();
        let lease = write.apply(observed.lease(k), k, settings, shards.brake_frozen());
        let name = lease_name(k);
        let call = async {
            match observed.lease(k) {
                Some(_) => api.replace(&name, &PostParams::default(), &lease).await,
                None => api.create(&PostParams::default(), &lease).await,
            }
        };
        match tokio::time::timeout(deadline, call).await {
            Ok(Ok(written)) => {
                if matches!(write, Write::Renew | Write::Take) {
                    if write == Write::Take {
                        tracing::info!(shard = k, lease = %name, "this replica took the shard");
                        if let Some(hook) = on_take {
                            let took = tokio::time::timeout(deadline / 2, hook(k)).await;
                            if took.is_err() {
                                tracing::warn!(
                                    shard = k,
                                    "taking over the shard's state did not finish in time; acting on it with what this replica knows"
                                );
                            }
                        }
                    }
                    shards.renewed(k, sent, settings.url.clone());
                } else if write == Write::Release {
                    tracing::info!(shard = k, lease = %name, "this replica released the shard");
                } else {
                    tracing::info!(shard = k, lease = %name, "asked the shard's holder for it");
                }
                observed.wrote(k, written);
            }
            Ok(Err(kube::Error::Api(e))) if e.code == 409 => {
                tracing::debug!(
                    shard = k,
                    ?write,
                    "the shard Lease changed meanwhile; next round decides again"
                )
            }
            Ok(Err(e)) => tracing::warn!(shard = k, lease = %name, ?write, error = %e,
                "cannot write the shard Lease; check the hub may create and update it"),
            Err(_) => {
                tracing::warn!(shard = k, lease = %name, ?write, "the shard Lease write did not answer")
            }
        }
    }
}

/// A graceful stop: every shard this replica holds is released, so its new holders take
/// them at once rather than after the lease expires.
async fn release_all(
    api: &Api<Lease>,
    settings: &ShardSettings,
    shards: &Shards,
    observed: &Observed,
) {
    for k in shards.owned() {
        shards.drop_shard(k);
        let Some(current) = observed.lease(k) else {
            continue;
        };
        let lease = Write::Release.apply(Some(current), k, settings, false);
        let (name, params) = (lease_name(k), PostParams::default());
        let call = api.replace(&name, &params, &lease);
        match tokio::time::timeout(Duration::from_secs(2), call).await {
            Ok(Ok(_)) => tracing::info!(shard = k, "shard released at stop"),
            _ => tracing::warn!(
                shard = k,
                "could not release the shard at stop; it moves when its lease expires"
            ),
        }
    }
}

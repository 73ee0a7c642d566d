//! [`Shards`]: which shards this replica owns right now, and who owns the others, shared
//! by the Lease loop (which records renewals) and everything that acts on a shard (which
//! asks before acting).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::watch;
use tokio::time::Instant;

use super::lease::Observed;
use crate::fleet::Ownership;
use crate::ids::{ClusterId, shard_of};
use crate::shards::ShardSettings;

/// Another replica owning a shard, as its Lease names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Its identity (Pod name).
    pub identity: String,
    /// The URL it serves agents on, if it wrote one on the Lease.
    pub url: Option<String>,
}

#[derive(Clone, Default)]
struct Slot {
    /// When this replica's last renewal of the shard that landed was sent.
    renewed: Option<Instant>,
    /// The holder as last listed.
    holder: Option<Owner>,
    /// How many times this replica took the shard.
    term: u64,
    /// Whether the holder's partition brake is frozen, as its Lease last said.
    frozen: bool,
}

struct Inner {
    identity: String,
    deadline: Duration,
    slots: RwLock<Vec<Slot>>,
    /// Bumped whenever this replica takes or gives up a shard.
    changes: watch::Sender<u64>,
    /// Whether this replica's partition brake is frozen (written on its Leases).
    brake: AtomicBool,
}

/// Which shards this replica owns; cheap to clone.
#[derive(Clone)]
pub struct Shards(Arc<Inner>);

impl Shards {
    pub(super) fn new(settings: &ShardSettings) -> Self {
        Shards(Arc::new(Inner {
            identity: settings.identity.clone(),
            deadline: settings.renew_deadline(),
            slots: RwLock::new(vec![Slot::default(); settings.shards.max(1) as usize]),
            changes: watch::channel(0).0,
            brake: AtomicBool::new(false),
        }))
    }

    /// How many shards the fleet is cut into.
    pub fn count(&self) -> u32 {
        self.0.slots.read().len() as u32
    }

    /// The shard `cluster` falls in.
    pub fn shard_of(&self, cluster: &ClusterId) -> u32 {
        shard_of(cluster, self.count())
    }

    /// Whether this replica may act on shard `k` now: its last renewal landed within the
    /// renew deadline.
    pub fn owns(&self, k: u32) -> bool {
        let slots = self.0.slots.read();
        let renewed = slots.get(k as usize).and_then(|s| s.renewed);
        renewed.is_some_and(|at| at.elapsed() < self.0.deadline)
    }

    /// The term of this replica's ownership of shard `k` (how many times it took it), or
    /// `None` when it does not own it now.
    pub fn term(&self, k: u32) -> Option<u64> {
        let slots = self.0.slots.read();
        let slot = slots.get(k as usize)?;
        let owned = slot
            .renewed
            .is_some_and(|at| at.elapsed() < self.0.deadline);
        owned.then_some(slot.term)
    }

    /// Whether this replica may act on `cluster` now.
    pub fn owns_cluster(&self, cluster: &ClusterId) -> bool {
        self.owns(self.shard_of(cluster))
    }

    /// The shards this replica owns now, in order.
    pub fn owned(&self) -> Vec<u32> {
        (0..self.count()).filter(|&k| self.owns(k)).collect()
    }

    /// Who holds shard `k` by its Lease as last listed (this replica included).
    pub fn owner(&self, k: u32) -> Option<Owner> {
        self.0.slots.read().get(k as usize)?.holder.clone()
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.0.identity
    }

    /// A receiver that changes whenever this replica takes or gives up a shard (a shard
    /// whose renewals stop landing lapses by time alone: [`Self::owns`] says so).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.0.changes.subscribe()
    }

    pub(super) fn renewed(&self, k: u32, sent: Instant, url: Option<String>) {
        let mut slots = self.0.slots.write();
        let Some(slot) = slots.get_mut(k as usize) else {
            return;
        };
        let was = slot
            .renewed
            .is_some_and(|at| at.elapsed() < self.0.deadline);
        if !was {
            slot.term += 1;
        }
        slot.renewed = Some(sent);
        slot.holder = Some(Owner {
            identity: self.0.identity.clone(),
            url,
        });
        drop(slots);
        if !was {
            self.0.changes.send_modify(|n| *n += 1);
        }
    }

    pub(super) fn drop_shard(&self, k: u32) {
        if let Some(slot) = self.0.slots.write().get_mut(k as usize) {
            slot.renewed = None;
        }
        self.0.changes.send_modify(|n| *n += 1);
    }

    pub(super) fn record_holders(&self, observed: &Observed) {
        let mut slots = self.0.slots.write();
        for (k, slot) in slots.iter_mut().enumerate() {
            let holder = observed.holder(k as u32);
            slot.frozen = holder.as_ref().is_some_and(|(_, _, frozen)| *frozen);
            slot.holder = holder.map(|(identity, url, _)| Owner { identity, url });
        }
    }

    /// Whether this replica's partition brake is frozen, as it last published.
    pub(super) fn brake_frozen(&self) -> bool {
        self.0.brake.load(Ordering::Relaxed)
    }
}

/// The detector judges only the clusters of the shards this replica owns,
/// and the partition brakes of all replicas freeze set reassignment together.
impl Ownership for Shards {
    fn term(&self, cluster: &ClusterId) -> Option<u64> {
        Shards::term(self, self.shard_of(cluster))
    }

    fn publish_brake(&self, frozen: bool) {
        self.0.brake.store(frozen, Ordering::Relaxed);
    }

    /// As another replica's Leases last said: a dead replica's say lapses when its
    /// shards are taken, within a lease duration.
    fn brake_elsewhere(&self) -> bool {
        let slots = self.0.slots.read();
        (slots.iter()).any(|s| {
            s.frozen
                && s.holder
                    .as_ref()
                    .is_some_and(|h| h.identity != self.0.identity)
        })
    }
}

#[cfg(any(test, feature = "testing"))]
impl Shards {
    /// A fixed view for tests: this replica owns `owned` (as if just renewed) and `others`
    /// are held by other replicas.
    pub fn fixed(settings: &ShardSettings, owned: &[u32], others: &[(u32, Owner)]) -> Self {
        let shards = Shards::new(settings);
        for &k in owned {
            shards.renewed(k, Instant::now(), settings.url.clone());
        }
        let mut slots = shards.0.slots.write();
        for (k, owner) in others {
            if let Some(slot) = slots.get_mut(*k as usize) {
                slot.holder = Some(owner.clone());
            }
        }
        drop(slots);
        shards
    }
}

//! What changed for the mirror feed since it last read the fleet: the clusters whose
//! mirror input (health, membership labels, mirror list, rollout hold) may differ, and the
//! membership labels the sets gave them. The feed drains it on each sync, so a sync reads
//! the clusters that changed, not the whole fleet.
//!
//! Marked where the fleet changes: a status write (every health transition and every
//! condition the hub sets; a heartbeat's transition once the sets it may move were
//! evaluated, so that one sync reads both), the first heartbeat this hub process hears from a cluster, an
//! object change reaching a cluster, a set evaluation that changes a cluster's
//! memberships or its rollout hold. A change the fleet cannot name cluster by cluster (set
//! statuses restored from the store or adopted from another replica) marks everything,
//! as does a fresh fleet: the feed's first sync reads every cluster.

use std::collections::{HashMap, HashSet};
use std::mem;

use fleetpulse_common::protocol::report::ClusterId;

use super::Fleet;

/// The changes since the feed's last sync.
#[derive(Debug)]
pub struct Changed {
    /// Every cluster may have changed: the feed reads all of them and every membership.
    pub all: bool,
    /// The clusters that may have changed.
    pub clusters: HashSet<ClusterId>,
    /// Clusters whose membership labels changed, with the labels they carry now (none: no
    /// set selects them any more).
    pub memberships: HashMap<ClusterId, Vec<String>>,
}

impl Default for Changed {
    /// Everything: what the feed has not read yet.
    fn default() -> Self {
        Self {
            all: true,
            clusters: HashSet::new(),
            memberships: HashMap::new(),
        }
    }
}

impl Changed {
    /// Nothing changed.
    fn none() -> Self {
        Self {
            all: false,
            ..Self::default()
        }
    }

    /// Whether there is nothing to read.
    pub fn is_empty(&self) -> bool {
        !self.all && self.clusters.is_empty()
    }

    /// Marks `cluster` (not kept once everything is marked).
    pub(super) fn mark(&mut self, cluster: &ClusterId) {
        if !self.all && !self.clusters.contains(cluster) {
            self.clusters.insert(cluster.clone());
        }
    }

    /// Marks everything: the clusters marked so far are then read with all the others.
    pub(super) fn mark_all(&mut self) {
        self.all = true;
        self.clusters = HashSet::new();
        self.memberships = HashMap::new();
    }

    /// Records that `cluster` now carries `labels`, and marks it.
    pub(super) fn membership(&mut self, cluster: ClusterId, labels: Vec<String>) {
        if self.all {
            return;
        }
        self.mark(&cluster);
        self.memberships.insert(cluster, labels);
    }
}

impl Fleet {
    /// Takes what changed since the last call (everything, at the first), leaving nothing.
    /// Meant for one reader, the mirror feed.
    pub fn take_changed(&self) -> Changed {
        mem::replace(&mut *self.changed.lock(), Changed::none())
    }

    /// Marks `cluster` as changed for the mirror feed.
    pub(super) fn mark_changed(&self, cluster: &ClusterId) {
        self.changed.lock().mark(cluster);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> ClusterId {
        ClusterId::new("fleet", name)
    }

    #[test]
    fn a_fresh_index_holds_everything_and_a_taken_one_nothing() {
        let mut changed = Changed::default();
        assert!(changed.all && !changed.is_empty());
        changed.mark(&id("a"));
        assert!(changed.clusters.is_empty(), "everything is marked already");
        let taken = mem::replace(&mut changed, Changed::none());
        assert!(taken.all);
        assert!(changed.is_empty());
    }

    #[test]
    fn marks_name_each_cluster_once_and_keep_the_latest_labels() {
        let mut changed = Changed::none();
        changed.mark(&id("a"));
        changed.membership(id("b"), vec!["one".into()]);
        changed.membership(id("b"), vec![]);
        changed.mark(&id("a"));
        assert_eq!(changed.clusters, HashSet::from([id("a"), id("b")]));
        assert_eq!(changed.memberships, HashMap::from([(id("b"), vec![])]));
    }

    #[test]
    fn marking_everything_drops_the_single_marks() {
        let mut changed = Changed::none();
        changed.membership(id("b"), vec!["one".into()]);
        changed.mark_all();
        assert!(changed.all);
        assert!(changed.clusters.is_empty() && changed.memberships.is_empty());
    }
}

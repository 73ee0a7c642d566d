//! An in-memory [`Store`]: the test double beside the SQLite store. It keeps every write, so
//! tests can count them (the hub writes O(transitions)) and restart a fleet from them.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::store::{Snapshot, Store, StoreError, Write};

/// Keeps writes in memory; clones share them.
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    writes: Arc<Mutex<Vec<Write>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every write applied so far, in order.
    pub fn writes(&self) -> Vec<Write> {
        self.writes.lock().clone()
    }
}

impl Store for MemoryStore {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        let mut snapshot = Snapshot::default();
        for write in self.writes.lock().iter() {
            match write {
                Write::Cluster { cluster, record } => {
                    snapshot.clusters.insert(cluster.clone(), record.clone());
                }
                Write::Set { key, status } => {
                    snapshot.sets.insert(key.clone(), status.clone());
                }
                Write::Positions {
                    cluster, positions, ..
                } => {
                    let known = snapshot.positions.entry(cluster.clone()).or_default();
                    for (kid, pos) in positions {
                        let entry = known.entry(kid.clone()).or_insert(*pos);
                        *entry = (*entry).max(*pos);
                    }
                }
            }
        }
        Ok(snapshot)
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        self.writes.lock().extend_from_slice(writes);
        Ok(())
    }
}

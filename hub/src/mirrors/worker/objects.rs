//! The worker's objects, grouped by cluster, with an index of when each is next due, so
//! one turn of the worker costs what changed, not the number of objects: the next wake-up
//! is the index's first entry, starting writes walks only what is due, and statuses are
//! rebuilt only for the clusters touched since the last publish.

use std::collections::{BTreeSet, HashMap, HashSet};

use backon::ExponentialBackoff;
use fleetpulse_common::protocol::report::ClusterId;
use tokio::time::Instant;

use super::super::Entry;
use super::super::plan::Wanted;
use super::super::status::MirrorState;
use super::super::writer::Target;

/// A cluster's mirror: its object, or (for an unknown kind or an unresolved default) its
/// position in the cluster's list.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(in crate::mirrors) enum Slot {
    Object(Target),
    Unresolved(usize),
}

impl Slot {
    fn of(entry: &Entry, position: usize) -> Self {
        match &entry.target {
            Some(t) => Self::Object(t.clone()),
            None => Self::Unresolved(position),
        }
    }
}

/// One object, by its cluster and slot.
pub(in crate::mirrors) type Key = (ClusterId, Slot);

/// A touched cluster and its objects (`None`: it has none any more).
pub(in crate::mirrors) type Touched<'a> = (ClusterId, Option<&'a [(Slot, Object)]>);

/// One mirror object's state.
pub(in crate::mirrors) struct Object {
    pub entry: Entry,
    /// What was last written or found in place (`None`: unknown, read before writing).
    pub synced: Option<Wanted>,
    /// When it is next written or re-read; changed only through [`Objects::schedule`].
    due: Option<Instant>,
    pub backoff: Option<ExponentialBackoff>,
    pub writes: u64,
    pub outcome: Option<(MirrorState, String, String)>,
}

impl Object {
    fn new(entry: Entry) -> Self {
        Self {
            entry,
            synced: None,
            due: None,
            backoff: None,
            writes: 0,
            outcome: None,
        }
    }

    /// It is due and what it holds differs from what is wanted: a write is queued.
    pub fn waiting(&self) -> bool {
        self.due.is_some() && self.synced.as_ref() != Some(&self.entry.wanted)
    }
}

/// Every object, by cluster (each cluster's sorted by slot), and the index of when the
/// objects not in flight are due.
#[derive(Default)]
pub(in crate::mirrors) struct Objects {
    by_cluster: HashMap<ClusterId, Vec<(Slot, Object)>>,
    due: BTreeSet<(Instant, Key)>,
    in_flight: HashSet<Key>,
    touched: HashSet<ClusterId>,
}

impl Objects {
    /// Replaces `cluster`'s objects by one per entry (an object whose slot is listed again
    /// keeps its state; a slot listed twice keeps the later entry) and returns them, with
    /// whether each one's wanted state changed, for the caller to decide what is due.
    pub fn replace(&mut self, cluster: &ClusterId, entries: Vec<Entry>) -> Vec<(Key, bool)> {
        let mut old: HashMap<Slot, Object> = self
            .by_cluster
            .remove(cluster)
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut fresh: Vec<(Slot, Entry)> = entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| (Slot::of(&e, i), e))
            .collect();
        fresh.sort_by(|a, b| a.0.cmp(&b.0));
        // Stable sort: of a slot listed twice, the later entry is the last of its run.
        fresh.reverse();
        fresh.dedup_by(|later, earlier| later.0 == earlier.0);
        fresh.reverse();
        let mut objects: Vec<(Slot, Object)> = Vec::with_capacity(fresh.len());
        let mut changed = Vec::with_capacity(fresh.len());
        for (slot, entry) in fresh {
            let mut object = old
                .remove(&slot)
                .unwrap_or_else(|| Object::new(entry.clone()));
            let differs = object.entry.wanted != entry.wanted || object.outcome.is_none();
            object.entry = entry;
            changed.push(((cluster.clone(), slot.clone()), differs));
            objects.push((slot, object));
        }
        for (slot, object) in old {
            if let Some(at) = object.due {
                self.due.remove(&(at, (cluster.clone(), slot)));
            }
        }
        self.touched.insert(cluster.clone());
        if !objects.is_empty() {
            self.by_cluster.insert(cluster.clone(), objects);
        }
        changed
    }

    /// Drops `cluster`'s objects.
    pub fn forget(&mut self, cluster: &ClusterId) {
        self.replace(cluster, Vec::new());
    }

    /// The object at `key`, marking its cluster for the next publish.
    pub fn get_mut(&mut self, key: &Key) -> Option<&mut Object> {
        let objects = self.by_cluster.get_mut(&key.0)?;
        let at = objects.binary_search_by(|(s, _)| s.cmp(&key.1)).ok()?;
        self.touched.insert(key.0.clone());
        Some(&mut objects[at].1)
    }

    /// Sets when `key` is next due (`None`: not until its wanted state changes). An
    /// object in flight keeps the time, and enters the index when it lands.
    pub fn schedule(&mut self, key: &Key, due: Option<Instant>) {
        let in_flight = self.in_flight.contains(key);
        let Some(object) = self.get_mut(key) else {
            return;
        };
        let before = std::mem::replace(&mut object.due, due);
        if let Some(at) = before {
            self.due.remove(&(at, key.clone()));
        }
        if let Some(at) = due
            && !in_flight
        {
            self.due.insert((at, key.clone()));
        }
    }

    /// The earliest time an object not in flight is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.first().map(|(at, _)| *at)
    }

    /// Takes up to `limit` objects due by `now` off the index and marks them in flight.
    pub fn start_due(&mut self, now: Instant, limit: usize) -> Vec<Key> {
        let mut started = Vec::new();
        while started.len() < limit {
            let Some((at, key)) = self.due.first().cloned() else {
                break;
            };
            if at > now {
                break;
            }
            self.schedule(&key, None);
            self.in_flight.insert(key.clone());
            started.push(key);
        }
        started
    }

    /// A write of `key` ended: it may be scheduled again.
    pub fn landed(&mut self, key: &Key) {
        self.in_flight.remove(key);
    }

    /// Every write in flight was aborted: each is due again at `now`.
    pub fn aborted(&mut self, now: Instant) {
        for key in std::mem::take(&mut self.in_flight) {
            self.schedule(&key, Some(now));
        }
    }

    /// Marks every cluster for the next publish (what every status shows changed).
    pub fn touch_all(&mut self) {
        self.touched.extend(self.by_cluster.keys().cloned());
    }

    /// The clusters touched since the last call, each with its objects (`None`: it has
    /// none any more).
    pub fn take_touched(&mut self) -> Vec<Touched<'_>> {
        let touched = std::mem::take(&mut self.touched);
        touched
            .into_iter()
            .map(|c| {
                let objects = self.by_cluster.get(&c).map(Vec::as_slice);
                (c, objects)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;

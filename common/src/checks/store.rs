//! [`KindStore`]: the objects the agent's watch-fed cache keeps for one kind, namespace
//! scope and label selector, as its watch has told them, each as compact JSON text
//! ([`CompactObject`]) with the few fields a read filters on. Pure: the agent's watch task
//! applies [`Change`]s object by object, rounds read with [`KindStore::select`]; no I/O,
//! so it is tested without an API server (and benchmarks read it as the agent does).
//!
//! Objects are held by namespace and name (so a read returns them in the order a list
//! would) and identified by uid and resourceVersion: a change that carries the uid and
//! resourceVersion already held changes nothing (an event replayed after a resumed
//! watch), and one with another uid under the same name replaces the object (it was
//! deleted and made again). A relist (the watch's history expired: 410 Gone) is gathered
//! aside and replaces the objects whole when it is complete, so reads never see half of
//! one; until then they see the objects as they were, and an object the relist finds
//! unchanged (same uid and resourceVersion) keeps the text held before.

use std::collections::BTreeMap;

use super::labels::filters_match;
use super::query::Query;
use crate::compact::CompactObject;

/// One object as the cache holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cached {
    /// `metadata.namespace` ("" for cluster-scoped objects).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.labels`, for `labelFilters`.
    pub labels: BTreeMap<String, String>,
    /// Whether `metadata.deletionTimestamp` is set (such objects are never selected).
    pub deleting: bool,
    /// The object, without managedFields.
    pub object: CompactObject,
}

/// What the watch reported.
#[derive(Debug)]
pub enum Change {
    /// A (re)list begins.
    Relist,
    /// An object of the list under way.
    Listed(Cached),
    /// The list is complete: it replaces what was held.
    RelistDone,
    /// An object was added or modified.
    Applied(Cached),
    /// An object was deleted.
    Deleted(Cached),
}

/// The objects of one cache key and whether they can be read yet.
#[derive(Debug, Default)]
pub struct KindStore {
    objects: BTreeMap<(String, String), Cached>,
    /// A relist under way.
    relisting: Option<BTreeMap<(String, String), Cached>>,
    synced: bool,
    not_served: bool,
    last_error: Option<String>,
}

fn insert(objects: &mut BTreeMap<(String, String), Cached>, object: Cached) {
    let key = (object.namespace.clone(), object.name.clone());
    if objects.get(&key).is_some_and(|held| {
        held.uid == object.uid && held.resource_version == object.resource_version
    }) {
        return;
    }
    objects.insert(key, object);
}

impl KindStore {
    /// Applies `change`.
    pub fn apply(&mut self, change: Change) {
        match change {
            Change::Relist => self.relisting = Some(BTreeMap::new()),
            Change::Listed(object) => insert(self.relisting.get_or_insert_default(), object),
            Change::RelistDone => {
                let mut listed = self.relisting.take().unwrap_or_default();
                // An object the relist found unchanged keeps the text held: a Lua state
                // that converted it knows it by that text.
                for (key, object) in &mut listed {
                    if let Some(held) = self.objects.get(key).filter(|held| {
                        held.uid == object.uid && held.resource_version == object.resource_version
                    }) {
                        object.object = held.object.clone();
                    }
                }
                self.objects = listed;
                self.synced = true;
                self.not_served = false;
                self.last_error = None;
            }
            Change::Applied(object) => insert(&mut self.objects, object),
            Change::Deleted(object) => {
                let key = (object.namespace, object.name);
                if self
                    .objects
                    .get(&key)
                    .is_some_and(|held| held.uid == object.uid)
                {
                    self.objects.remove(&key);
                }
            }
        }
    }

    /// The API server does not serve the kind: reads see no objects (as a list of a kind
    /// the cluster does not have), until it does.
    pub fn not_served(&mut self) {
        self.objects.clear();
        self.relisting = None;
        self.not_served = true;
        self.last_error = None;
    }

    /// Listing or watching failed with `error` (it is retried with backoff).
    pub fn failed(&mut self, error: String) {
        self.last_error = Some(error);
    }

    /// Whether reads can be answered: a first list completed, or the kind is not served.
    pub fn is_synced(&self) -> bool {
        self.synced || self.not_served
    }

    /// The last error since the last complete list, if any.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// How many objects are held.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether no object is held.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The objects `query` selects among those held (name, namespace, labels,
    /// `labelFilters`, not being deleted), sharing the held text: an object that has not
    /// changed is handed out as the same text every time.
    pub fn select(&self, query: &Query) -> Vec<CompactObject> {
        self.objects
            .values()
            .filter(|c| {
                query.name.as_ref().is_none_or(|n| *n == c.name)
                    && query.namespace.as_ref().is_none_or(|ns| *ns == c.namespace)
                    && !c.deleting
                    && query.labels.matches(&c.labels)
                    && filters_match(&query.filters, &c.labels)
            })
            .map(|c| c.object.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests;

//! The in-memory object store: objects by resource, one global resourceVersion counter, the
//! bounded watch-event history, and the request/write ledgers tests read back.

use crate::resources::{Registry, ResourceDef};
use serde_json::Value;
use std::{
    collections::{BTreeMap, VecDeque},
    sync::Arc,
};
use tokio::sync::broadcast;

/// How many watch events are kept for resuming watches; older resourceVersions get 410 Gone.
pub const HISTORY: usize = 1000;

/// The kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    /// Wire name (`ADDED`, `MODIFIED`, `DELETED`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as kept in the history and broadcast to open watches.
#[derive(Debug, Clone)]
pub struct WatchRecord {
    /// resourceVersion assigned by this change.
    pub rv: u64,
    /// Storage key of the resource (`group/plural`).
    pub key: String,
    /// Namespace of the object, empty when cluster-scoped.
    pub namespace: String,
    /// What happened.
    pub event: EventType,
    /// The object after the change (for deletions: its last state).
    pub object: Value,
}

/// One API request as the server saw it, for comparing RBAC rules with real calls.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestRecord {
    /// RBAC verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// API group, empty for core.
    pub group: String,
    /// Plural resource name.
    pub resource: String,
    /// Namespace in the path, if any.
    pub namespace: Option<String>,
    /// Subresource (`status`, `log`), if any.
    pub subresource: Option<String>,
    /// Object name in the path, if any.
    pub name: Option<String>,
}

/// A receiver of future watch records.
pub type Subscription = broadcast::Receiver<Arc<WatchRecord>>;

/// Namespace + name.
type ObjName = (String, String);

/// All mutable server state; lives behind one mutex.
#[derive(Debug)]
pub struct Store {
    rv: u64,
    /// Served resource types.
    pub registry: Registry,
    objects: BTreeMap<String, BTreeMap<ObjName, Value>>,
    history: VecDeque<Arc<WatchRecord>>,
    compacted_rv: u64,
    tx: broadcast::Sender<Arc<WatchRecord>>,
    /// Mutating request counts by (resource[/subresource], verb).
    pub writes: BTreeMap<(String, String), u64>,
    /// Every resource request, in arrival order.
    pub requests: Vec<RequestRecord>,
    /// Container logs by (namespace, pod name), served by `pods/log`.
    pub pod_logs: BTreeMap<ObjName, String>,
    /// Competing writes to make just before a request: (resource, verb, merge patch), see
    /// [`crate::KubeSim::interleave_before_next`].
    pub interleaved: Vec<(String, String, Value)>,
    /// (resource, verb) pairs answered 500 until allowed again (see
    /// [`crate::KubeSim::refuse`]).
    pub refused: std::collections::BTreeSet<(String, String)>,
}

impl Default for Store {
    fn default() -> Self {
        Self {
            rv: 0,
            registry: Registry::default(),
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            compacted_rv: 0,
            tx: broadcast::channel(4 * HISTORY).0,
            writes: BTreeMap::new(),
            interleaved: Vec::new(),
            refused: Default::default(),
            requests: Vec::new(),
            pod_logs: BTreeMap::new(),
        }
    }
}

/// `metadata.namespace` and `metadata.name` of an object (empty strings when absent).
pub fn ns_name(obj: &Value) -> (String, String) {
    let m = &obj["metadata"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (s(&m["namespace"]), s(&m["name"]))
}

impl Store {
    /// The current (latest assigned) resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    /// One object.
    pub fn get(&self, def: &ResourceDef, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(&def.storage_key())?
            .get(&(ns.to_owned(), name.to_owned()))
    }

    /// All objects of a resource, optionally restricted to a namespace, ordered by (ns, name).
    pub fn list(&self, def: &ResourceDef, ns: Option<&str>) -> Vec<Value> {
        self.objects
            .get(&def.storage_key())
            .into_iter()
            .flat_map(|m| m.iter())
            .filter(|((n, _), _)| ns.is_none_or(|want| n == want))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Stores the object (new or changed), stamping a fresh resourceVersion and `apiVersion`
    /// / `kind`, and records the event. Returns the stored object.
    pub fn put(&mut self, def: &ResourceDef, mut obj: Value, event: EventType) -> Value {
        self.rv += 1;
        obj["apiVersion"] = def.api_version().into();
        obj["kind"] = def.kind.clone().into();
        obj["metadata"]["resourceVersion"] = self.rv.to_string().into();
        let key = ns_name(&obj);
        self.objects
            .entry(def.storage_key())
            .or_default()
            .insert(key, obj.clone());
        self.record(def, obj.clone(), event);
        obj
    }

    /// Removes an object, recording a DELETED event carrying a fresh resourceVersion.
    pub fn remove(&mut self, def: &ResourceDef, ns: &str, name: &str) -> Option<Value> {
        let mut obj = self
            .objects
            .get_mut(&def.storage_key())?
            .remove(&(ns.to_owned(), name.to_owned()))?;
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = self.rv.to_string().into();
        self.record(def, obj.clone(), EventType::Deleted);
        if def.group.is_empty() && def.plural == "pods" {
            self.pod_logs.remove(&(ns.to_owned(), name.to_owned()));
        }
        Some(obj)
    }

    /// Drops every object of a resource without events (used when its CRD is deleted).
    pub fn drop_resource(&mut self, storage_key: &str) {
        self.objects.remove(storage_key);
    }

    fn record(&mut self, def: &ResourceDef, object: Value, event: EventType) {
        let rec = Arc::new(WatchRecord {
            rv: self.rv,
            key: def.storage_key(),
            namespace: ns_name(&object).0,
            event,
            object,
        });
        self.history.push_back(rec.clone());
        while self.history.len() > HISTORY {
            if let Some(old) = self.history.pop_front() {
                self.compacted_rv = old.rv;
            }
        }
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(rec);
    }

    /// Subscribes to future events and returns the retained events after `from_rv`, or `None`
    /// when events after `from_rv` have already been dropped (the watch must answer 410 Gone).
    pub fn watch_from(&self, from_rv: u64) -> Option<(Vec<Arc<WatchRecord>>, Subscription)> {
        if from_rv < self.compacted_rv {
            return None;
        }
        let replay = self
            .history
            .iter()
            .filter(|r| r.rv > from_rv)
            .cloned()
            .collect();
        Some((replay, self.tx.subscribe()))
    }

    /// A fresh receiver of future events.
    pub fn subscribe(&self) -> Subscription {
        self.tx.subscribe()
    }

    /// Forgets the whole watch history, so that every watch resuming from a resourceVersion
    /// handed out so far gets 410 Gone (as after etcd compaction).
    pub fn expire_history(&mut self) {
        self.rv += 1;
        self.compacted_rv = self.rv;
        self.history.clear();
    }
}

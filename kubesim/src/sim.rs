//! The [`KubeSim`] handle: builds one simulated cluster, hands out in-process `kube::Client`s,
//! serves it over HTTP, and exposes the test controls (node readiness, pod outcomes, ledgers).

use crate::{
    kubelet::{self, Outcome, PodMatcher},
    ops,
    server::{self, Shared},
    store::{RequestRecord, ns_name},
};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use std::{collections::BTreeMap, net::SocketAddr, sync::Arc, time::Duration};
use tokio::task::JoinHandle;

/// Namespaces present at start; `kube-system`'s UID is the cluster UID.
const START_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Configures a [`KubeSim`] before it starts.
#[derive(Debug, Clone)]
pub struct KubeSimBuilder {
    nodes: usize,
    tick: Duration,
}

impl Default for KubeSimBuilder {
    fn default() -> Self {
        Self {
            nodes: 3,
            tick: Duration::from_millis(50),
        }
    }
}

impl KubeSimBuilder {
    /// Number of Ready nodes created at start, named `node-1`..`node-N` (default 3).
    pub fn nodes(mut self, n: usize) -> Self {
        self.nodes = n;
        self
    }

    /// How often the simulated kubelet advances pods by one step (default 50 ms).
    pub fn kubelet_tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// Starts the cluster. Must be called inside a Tokio runtime (the kubelet is a task).
    pub fn build(self) -> KubeSim {
        let shared = Arc::new(Shared::default());
        {
            let mut store = shared.store.lock();
            let ns_def = store.registry.find("", "v1", "namespaces").cloned();
            let node_def = store.registry.find("", "v1", "nodes").cloned();
            if let (Some(ns_def), Some(node_def)) = (ns_def, node_def) {
                for ns in START_NAMESPACES {
                    let obj = json!({"metadata": {"name": ns}});
                    let _ = ops::create(&mut store, &ns_def, "", obj);
                }
                for i in 1..=self.nodes {
                    let name = format!("node-{i}");
                    let _ = ops::create(&mut store, &node_def, "", kubelet::node_object(&name));
                    kubelet::set_node_ready(&mut store, &name, true);
                }
            }
        }
        let weak = Arc::downgrade(&shared);
        let tick = self.tick;
        let kubelet = tokio::spawn(async move {
            let mut interval = tokio::time::interval(tick);
            loop {
                interval.tick().await;
                match weak.upgrade() {
                    Some(shared) => kubelet::tick(&shared),
                    None => break,
                }
            }
        });
        KubeSim { shared, kubelet }
    }
}

/// One simulated cluster. Dropping it stops the kubelet; clients then see an empty server.
#[derive(Debug)]
pub struct KubeSim {
    shared: Arc<Shared>,
    kubelet: JoinHandle<()>,
}

impl Drop for KubeSim {
    fn drop(&mut self) {
        self.kubelet.abort();
    }
}

impl KubeSim {
    /// A cluster with the default settings (3 Ready nodes).
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder for non-default settings.
    pub fn builder() -> KubeSimBuilder {
        KubeSimBuilder::default()
    }

    /// The axum router serving the Kubernetes API of this cluster.
    pub fn router(&self) -> axum::Router {
        server::router(self.shared.clone())
    }

    /// A `kube::Client` talking to this cluster in-process (no socket), default namespace
    /// `default`.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.router(), "default")
    }

    /// Serves the API over plain HTTP on `addr` (port 0 picks a free port); returns the bound
    /// address and the server task.
    pub async fn serve(&self, addr: SocketAddr) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let router = self.router();
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::error!(error = %e, "kubesim server stopped");
            }
        });
        Ok((local, task))
    }

    /// The UID of the `kube-system` namespace, which fleetpulse treats as the cluster UID.
    pub fn cluster_uid(&self) -> String {
        let store = self.shared.store.lock();
        let def = store.registry.find("", "v1", "namespaces").cloned();
        def.and_then(|d| store.get(&d, "", "kube-system").cloned())
            .and_then(|ns| ns["metadata"]["uid"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    /// Flips a node's Ready condition (a MODIFIED watch event); false if no such node.
    pub fn set_node_ready(&self, name: &str, ready: bool) -> bool {
        kubelet::set_node_ready(&mut self.shared.store.lock(), name, ready)
    }

    /// Makes pods matching `matcher` (and not yet started) end with `outcome`; the newest
    /// matching rule wins, unmatched pods succeed.
    pub fn set_pod_outcome(&self, matcher: PodMatcher, outcome: Outcome) {
        self.shared.kubelet.lock().push(matcher, outcome);
    }

    /// Mutating request counts by (resource or `resource/subresource`, verb), e.g.
    /// `("pods", "create")`, `("widgets/status", "patch")`. Kubelet writes are not counted.
    pub fn writes(&self) -> BTreeMap<(String, String), u64> {
        self.shared.store.lock().writes.clone()
    }

    /// Count of one (resource, verb) pair from [`KubeSim::writes`].
    pub fn write_count(&self, resource: &str, verb: &str) -> u64 {
        let store = self.shared.store.lock();
        store
            .writes
            .get(&(resource.to_owned(), verb.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// Before the next `verb` request on `resource` (e.g. `("managedclusters", "patch")`),
    /// applies `merge_patch` to the object it targets as another writer (field manager
    /// `interleaved`, not counted in the ledger), so a request carrying the
    /// `resourceVersion` it read before gets 409 `Conflict`: a race made deterministic.
    pub fn interleave_before_next(&self, resource: &str, verb: &str, merge_patch: Value) {
        let mut store = self.shared.store.lock();
        store
            .interleaved
            .push((resource.to_owned(), verb.to_owned(), merge_patch));
    }

    /// Answers every `verb` request on `resource` (e.g. `("leases", "patch")`) with 500
    /// `InternalError` while `refused` is true (counted in the ledger, not applied): an
    /// outage of one kind of write, e.g. a leader that can no longer renew its Lease.
    pub fn refuse(&self, resource: &str, verb: &str, refused: bool) {
        let key = (resource.to_owned(), verb.to_owned());
        let mut store = self.shared.store.lock();
        if refused {
            store.refused.insert(key);
        } else {
            store.refused.remove(&key);
        }
    }

    /// Registers a bearer token: a TokenReview of it authenticates `username` in `groups`
    /// (and `system:authenticated`); any other token is not authenticated.
    pub fn add_token(&self, token: &str, username: &str, groups: &[&str]) {
        self.shared
            .reviews
            .lock()
            .add_token(token, username, groups);
    }

    /// Allows `subject` (a user name or a group) `verb` (or `*`) on the non-resource URL
    /// `path` (exact, or a prefix ending in `*`) in SubjectAccessReviews, as a ClusterRole
    /// with `nonResourceURLs` bound to it would; nothing else is allowed.
    pub fn allow_non_resource(&self, subject: &str, verb: &str, path: &str) {
        self.shared
            .reviews
            .lock()
            .allow_non_resource(subject, verb, path);
    }

    /// Total mutating requests so far.
    pub fn total_writes(&self) -> u64 {
        self.shared.store.lock().writes.values().sum()
    }

    /// Every resource request so far (discovery excluded), in arrival order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.store.lock().requests.clone()
    }

    /// Forgets the watch history and ends every open watch, so that resuming watchers get
    /// 410 Gone and must re-list (as after etcd compaction).
    pub fn expire_watch_history(&self) {
        self.shared.store.lock().expire_history();
        self.close_watches();
    }

    /// Ends every open watch stream, keeping the history: a watcher resuming from the last
    /// resourceVersion it saw gets the events it missed (as after a dropped connection or
    /// an API server's watch timeout).
    pub fn close_watches(&self) {
        self.shared.close_watches.send_modify(|n| *n += 1);
    }

    /// Watch streams open now (a stream counts until its client drops it or it ends).
    pub fn open_watches(&self) -> usize {
        self.shared.open_watches.load(Ordering::Relaxed)
    }

    /// Bytes of response bodies served to resource requests so far (lists, gets, writes'
    /// answers, and every watch event as it is sent); discovery, OpenAPI and health
    /// endpoints are not counted, as they are not in [`KubeSim::requests`].
    pub fn served_bytes(&self) -> u64 {
        self.shared.served_bytes.load(Ordering::Relaxed)
    }

    /// Names (`namespace/name`) of all pods currently stored, for debugging tests.
    pub fn pod_names(&self) -> Vec<String> {
        let store = self.shared.store.lock();
        let def = store.registry.find("", "v1", "pods").cloned();
        def.map(|d| store.list(&d, None))
            .unwrap_or_default()
            .iter()
            .map(|p| {
                let (n, m) = ns_name(p);
                format!("{n}/{m}")
            })
            .collect()
    }
}

impl Default for KubeSim {
    fn default() -> Self {
        Self::new()
    }
}

/// A kubeconfig (YAML) pointing at `url` (e.g. `http://127.0.0.1:PORT`) with no auth,
/// context `kubesim`, namespace `default`.
pub fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kubesim\n  cluster:\n    server: {url}\n\
         contexts:\n- name: kubesim\n  context:\n    cluster: kubesim\n    user: kubesim\n    \
         namespace: default\ncurrent-context: kubesim\nusers:\n- name: kubesim\n  user: {{}}\n"
    )
}

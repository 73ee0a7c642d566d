//! Mirrors: the hub's verdicts projected onto the objects other tools select clusters by
//! (SveltosCluster, Cluster API Cluster, Argo CD cluster Secret, OCM ManagedCluster,
//! Karmada Cluster, KubeFleet MemberCluster), so a failover moves workloads, not only a
//! status line.
//!
//! - [`plan`]: pure: the labels and taint wanted on one object, and what a write changes.
//! - [`kind`]: the supported kinds, their scope and taint effect.
//! - [`writer`]: server-side apply of labels, read-modify-write of the taint list.
//! - [`settings`]: the `serve` flags (hub-wide defaults, `--mirror-kubeconfig`, resync).
//! - [`status`]: per-object status and the `Mirrored` condition.
//! - [`feed`]: the writer's input from the fleet's decisions, and its output back into
//!   each MemberCluster's status.
//!
//! The hub feeds a [`MirrorsHandle`] what it decided for each cluster
//! ([`MirrorsHandle::observe`]); a background task writes only objects whose wanted state
//! changed, re-reads each object every resync interval (restoring what someone removed,
//! writing an object created since), retries failures with backoff, and writes nothing
//! at all while [`MirrorsHandle::freeze`] holds (the partition brake).

pub mod feed;
pub mod kind;
pub mod plan;
pub mod settings;
pub mod status;
mod worker;
pub mod writer;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fleetpulse_common::api::MirrorRef;
use fleetpulse_common::protocol::report::ClusterId;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use kind::MirrorKind;
pub use plan::MirrorInput;
pub use settings::MirrorArgs;
pub use status::{MirrorChange, MirrorState, MirrorStatus, MirroredCondition};

use plan::{TaintPlan, Wanted};
use writer::{Target, Writer};

/// One mirror of a cluster, resolved for the worker.
#[derive(Clone, Debug)]
struct Entry {
    /// The object, or `None` when the kind is unknown or a default did not resolve.
    target: Option<Target>,
    /// `kind apiVersion namespace/name`, for statuses.
    object: String,
    wanted: Wanted,
    /// Why it cannot be written at all (reason, message), fixed only by a spec change.
    problem: Option<(String, String)>,
}

enum Command {
    Observe {
        cluster: ClusterId,
        entries: Vec<Entry>,
    },
    Forget(ClusterId),
    Freeze(bool),
}

/// Starts the mirror writer.
pub struct Mirrors;

impl Mirrors {
    /// Spawns the background task on the current Tokio runtime. `client` is the cluster the
    /// mirror objects live on (`None`: nothing is written, statuses show what would be);
    /// the task ends with `stop`. The receiver yields every change of a cluster's
    /// `Mirrored` condition with the Event to publish.
    pub fn spawn(
        client: Option<kube::Client>,
        resync: Duration,
        stop: CancellationToken,
    ) -> (MirrorsHandle, mpsc::UnboundedReceiver<MirrorChange>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (changes_tx, changes_rx) = mpsc::unbounded_channel();
        let statuses = Arc::new(Mutex::new(HashMap::new()));
        let worker = worker::Worker {
            writer: client.map(|c| Arc::new(Writer::new(c))),
            resync,
            statuses: statuses.clone(),
            changes: changes_tx,
            stop,
        };
        tokio::spawn(worker.run(rx));
        (MirrorsHandle { tx, statuses }, changes_rx)
    }
}

/// How the hub talks to the mirror writer. Cheap to clone; every call returns at once.
#[derive(Clone)]
pub struct MirrorsHandle {
    tx: mpsc::UnboundedSender<Command>,
    statuses: Arc<Mutex<HashMap<ClusterId, Vec<MirrorStatus>>>>,
}

impl MirrorsHandle {
    /// What the hub decided for `cluster` and which objects mirror it (its `spec.mirrors`
    /// plus the hub-wide defaults, see [`MirrorArgs::mirrors_of`]); `problems` are defaults
    /// that did not resolve. Call it on every change of either; an unchanged call writes
    /// nothing. Mirrors no longer listed are no longer managed (their labels are left).
    pub fn observe(
        &self,
        cluster: ClusterId,
        mirrors: &[MirrorRef],
        problems: &[String],
        input: &MirrorInput,
    ) {
        let mut entries: Vec<Entry> = mirrors
            .iter()
            .map(|m| entry(&cluster.namespace, m, input))
            .collect();
        entries.extend(problems.iter().map(|p| Entry {
            target: None,
            object: "--mirror-default".into(),
            wanted: Wanted {
                labels: Default::default(),
                taint: TaintPlan::NotManaged,
            },
            problem: Some(("DefaultNotResolved".into(), p.clone())),
        }));
        let _ = self.tx.send(Command::Observe { cluster, entries });
    }

    /// The MemberCluster is gone: stop managing its mirrors (their labels are left as
    /// they are; removing them would move workloads on a deletion).
    pub fn forget(&self, cluster: ClusterId) {
        let _ = self.tx.send(Command::Forget(cluster));
    }

    /// The partition brake: while `true`, nothing is written (writes in flight are
    /// aborted); on release, every object whose wanted state changed meanwhile is written.
    pub fn freeze(&self, frozen: bool) {
        let _ = self.tx.send(Command::Freeze(frozen));
    }

    /// The state of each mirror of `cluster`, for the read API and `get`.
    pub fn status(&self, cluster: &ClusterId) -> Vec<MirrorStatus> {
        self.statuses
            .lock()
            .get(cluster)
            .cloned()
            .unwrap_or_default()
    }
}

impl crate::fleet::MirrorStatuses for MirrorsHandle {
    fn status(&self, cluster: &ClusterId) -> Vec<MirrorStatus> {
        MirrorsHandle::status(self, cluster)
    }
}

fn entry(default_namespace: &str, mirror: &MirrorRef, input: &MirrorInput) -> Entry {
    let object = mirror.describe(default_namespace);
    let Some(kind) = MirrorKind::of(mirror) else {
        let known: Vec<String> = kind::ALL
            .iter()
            .map(|k| format!("{} {}", k.kind(), k.api_version()))
            .collect();
        return Entry {
            target: None,
            wanted: Wanted {
                labels: Default::default(),
                taint: TaintPlan::NotManaged,
            },
            problem: Some((
                "UnknownKind".into(),
                format!(
                    "{object}: fleetpulse does not mirror this kind; use one of {} in spec.mirrors",
                    known.join(", ")
                ),
            )),
            object,
        };
    };
    let namespace = if kind.namespaced() {
        mirror
            .namespace
            .as_deref()
            .unwrap_or(default_namespace)
            .to_owned()
    } else {
        String::new()
    };
    let target = Target {
        kind,
        namespace,
        name: mirror.name.clone(),
    };
    Entry {
        object: target.describe(),
        target: Some(target),
        wanted: plan::plan(kind, mirror, input),
        problem: None,
    }
}

/// The wall clock as RFC 3339 (seconds), for a taint's `timeAdded`.
fn rfc3339_now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

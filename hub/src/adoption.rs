//! Adoption (`serve --kube --adopt KIND`): a fleet already listed as SveltosClusters,
//! Cluster API Clusters, Argo CD cluster Secrets, OCM ManagedClusters or Karmada Clusters
//! gets one MemberCluster per object, without anyone writing them.
//!
//! - Each matching object (`--adopt-selector`) becomes a MemberCluster of the same
//!   namespace and name (a cluster-scoped object: its name in `--adopt-namespace`), with
//!   the object's labels, the object as its mirror, and the annotation
//!   `fleetpulse.io/adopted-from`. It is written with server-side apply by the field
//!   manager `fleetpulse-adoption`, which owns only those fields: checks, keys and the
//!   rest are the users' to add.
//! - The new MemberCluster has no key, so it says `Enrolled=False` (`AwaitingEnrolment`)
//!   until an agent enrols with `fleetpulse-hub token create --for NAMESPACE/NAME`.
//! - An object that disappears leaves its MemberCluster in place, marked `Adopted=False`
//!   (`SourceDeleted`); a MemberCluster someone else created is never touched.
//!
//! See [`plan`] for the rules; this module watches and writes.

pub mod plan;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio_util::sync::CancellationToken;

use fleetpulse_common::api::MemberCluster;
use fleetpulse_common::protocol::report::ClusterId;

use crate::fleet::Fleet;
use crate::mirrors::MirrorKind;
use plan::{Action, Adopted};

pub use fleetpulse_common::api::condition::ADOPTED;
/// The field manager of the adoption's writes.
pub const FIELD_MANAGER: &str = "fleetpulse-adoption";

/// How often the loop looks for changes.
const RECHECK: Duration = Duration::from_secs(1);
/// How long a written wish that the MemberCluster does not show yet waits before it is
/// written again (the watch normally shows it within a second).
const REWRITE: Duration = Duration::from_secs(300);
/// How long a failed write waits before it is tried again.
const RETRY: Duration = Duration::from_secs(15);

/// The `serve` flags of adoption.
#[derive(Clone, Debug, clap::Args)]
pub struct AdoptArgs {
    /// Kubernetes mode: create a MemberCluster for every object of this kind
    /// (`sveltoscluster`, `capi-cluster`, `argocd-secret`, `ocm-managedcluster`,
    /// `karmada-cluster`, `kubefleet-membercluster`); repeat for several kinds.
    #[arg(long = "adopt", value_name = "KIND", env = "FLEETPULSE_ADOPT", value_delimiter = ',',
          value_parser = parse_kind, requires = "kube")]
    pub kinds: Vec<MirrorKind>,
    /// Adopt only objects with these labels (a label selector, e.g. `env=prod,tier!=test`).
    #[arg(
        long = "adopt-selector",
        value_name = "SELECTOR",
        env = "FLEETPULSE_ADOPT_SELECTOR"
    )]
    pub selector: Option<String>,
    /// Namespace of the MemberClusters adopted from cluster-scoped kinds (OCM, Karmada,
    /// KubeFleet), default: the enrolment namespace.
    #[arg(
        long = "adopt-namespace",
        value_name = "NAMESPACE",
        env = "FLEETPULSE_ADOPT_NAMESPACE"
    )]
    pub namespace: Option<String>,
    /// Namespace of the Argo CD cluster Secrets to adopt (only this one is watched).
    #[arg(
        long = "adopt-argocd-namespace",
        value_name = "NAMESPACE",
        env = "FLEETPULSE_ADOPT_ARGOCD_NAMESPACE",
        default_value = "argocd"
    )]
    pub argocd_namespace: String,
}

impl Default for AdoptArgs {
    /// Nothing adopted.
    fn default() -> Self {
        Self {
            kinds: Vec::new(),
            selector: None,
            namespace: None,
            argocd_namespace: "argocd".into(),
        }
    }
}

fn parse_kind(s: &str) -> Result<MirrorKind, String> {
    MirrorKind::from_short_name(s).ok_or_else(|| {
        let known: Vec<_> = crate::mirrors::kind::ALL
            .iter()
            .map(|k| k.short_name())
            .collect();
        format!("unknown kind {s:?}; one of {}", known.join(", "))
    })
}

/// One adopted kind's watch.
struct Source {
    kind: MirrorKind,
    store: Store<DynamicObject>,
    listed: Arc<AtomicBool>,
}

/// Watches each kind and keeps the MemberClusters in step until `stop`.
pub async fn run(
    client: kube::Client,
    fleet: Arc<Fleet>,
    args: AdoptArgs,
    namespace: String,
    stop: CancellationToken,
) {
    let events = Arc::new(AtomicU64::new(0));
    let sources: Vec<Source> = args
        .kinds
        .iter()
        .map(|&kind| watch(&client, kind, &args, &events, &stop))
        .collect();
    // What was written for each cluster, and when it may be written again.
    let mut written: HashMap<ClusterId, (Adopted, Instant)> = HashMap::new();
    let mut seen = None;
    let mut every = tokio::time::interval(RECHECK);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        let registry = fleet.registry();
        let now = (
            events.load(Ordering::Relaxed),
            Arc::as_ptr(&registry) as usize,
        );
        let due = written.values().any(|(_, again)| *again <= Instant::now());
        if seen == Some(now) && !due {
            continue;
        }
        seen = Some(now);
        let wanted: Vec<Adopted> = (sources.iter())
            .filter(|s| s.listed.load(Ordering::Relaxed))
            .flat_map(|s| {
                let state = s.store.state();
                let kind = s.kind;
                state
                    .iter()
                    .filter_map(|o| plan::adopted(kind, o, &namespace))
                    .collect::<Vec<_>>()
            })
            .collect();
        let existing: HashMap<ClusterId, &MemberCluster> = registry
            .clusters()
            .map(|e| (e.id.clone(), e.object.as_ref()))
            .collect();
        let listed: BTreeSet<String> = (sources.iter())
            .filter(|s| s.listed.load(Ordering::Relaxed))
            .map(|s| format!("{} {}", s.kind.kind(), s.kind.api_version()))
            .collect();
        let is_listed = |source: &str| {
            let mut words = source.split_whitespace();
            let kind_version = format!(
                "{} {}",
                words.next().unwrap_or(""),
                words.next().unwrap_or("")
            );
            listed.contains(&kind_version)
        };
        let wall = k8s_openapi::jiff::Timestamp::now();
        for action in plan::actions(&wanted, &existing, &is_listed) {
            match action {
                Action::Apply(a) => {
                    let fresh = written
                        .get(&a.id)
                        .is_some_and(|(w, again)| *w == a && *again > Instant::now());
                    if !fresh {
                        let wait = if apply(&client, &a).await {
                            REWRITE
                        } else {
                            RETRY
                        };
                        written.insert(a.id.clone(), (a, Instant::now() + wait));
                    }
                }
                Action::Condition(id, status, reason, message) => {
                    fleet.set_condition(&id, ADOPTED, Some((status, reason, &message)), wall);
                }
            }
        }
        let wanted: HashMap<&ClusterId, &Adopted> = wanted.iter().map(|a| (&a.id, a)).collect();
        written.retain(|id, (a, _)| wanted.get(id).is_some_and(|w| *w == a));
    }
}

/// Creates or updates an adopted MemberCluster; a failure is logged (and retried later).
async fn apply(client: &kube::Client, adopted: &Adopted) -> bool {
    let api: Api<MemberCluster> = Api::namespaced(client.clone(), &adopted.id.namespace);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let body = Patch::Apply(adopted.apply_body());
    match api.patch(&adopted.id.name, &params, &body).await {
        Ok(_) => {
            tracing::info!(cluster = %adopted.id, source = %adopted.source, "adopted");
            true
        }
        Err(error) => {
            tracing::error!(
                cluster = %adopted.id, source = %adopted.source, %error,
                "cannot write the adopted MemberCluster; check that its namespace exists and \
                 the hub may create and patch memberclusters there; retrying"
            );
            false
        }
    }
}

/// Starts the watch of one kind (retrying in the background if the kind is not served).
fn watch(
    client: &kube::Client,
    kind: MirrorKind,
    args: &AdoptArgs,
    events: &Arc<AtomicU64>,
    stop: &CancellationToken,
) -> Source {
    let (group, version) = match kind.api_version().rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", kind.api_version()),
    };
    let resource = ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: kind.api_version().to_owned(),
        kind: kind.kind().to_owned(),
        plural: kind.plural().to_owned(),
    };
    let mut labels: Vec<String> = args.selector.clone().into_iter().collect();
    let api: Api<DynamicObject> = if kind == MirrorKind::ArgoCdSecret {
        labels.push(format!("{}=cluster", plan::ARGOCD_SECRET_TYPE));
        Api::namespaced_with(client.clone(), &args.argocd_namespace, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let config = watcher::Config::default().labels(&labels.join(","));
    let writer = reflector::store::Writer::new(resource);
    let store = writer.as_reader();
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
    let listed = Arc::new(AtomicBool::new(false));
    let (flag, counter, stop) = (listed.clone(), events.clone(), stop.clone());
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut failing = false;
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                event = stream.next() => event,
            };
            match event {
                None => return,
                Some(Ok(event)) => {
                    failing = false;
                    if matches!(event, watcher::Event::InitDone) {
                        flag.store(true, Ordering::Relaxed);
                    }
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                Some(Err(error)) if !failing => {
                    failing = true;
                    tracing::error!(kind = kind.short_name(), %error,
                        "cannot watch the objects to adopt (is the kind installed, and may the hub list it?); retrying");
                }
                Some(Err(_)) => {}
            }
        }
    });
    Source {
        kind,
        store,
        listed,
    }
}

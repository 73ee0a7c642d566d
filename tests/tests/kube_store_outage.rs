//! The Kubernetes store through an API server outage: a status write refused while the API
//! is down reaches it once the API is back, though no further write is queued (the store's
//! writer retries on its own); a retried batch repeats only what did not happen. Through
//! the real `kube` client against kubesim.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Response, StatusCode};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::json;
use tower::ServiceExt;

use fleetpulse_common::api::{ClusterRef, ClusterSet, MemberCluster, SetStatus, crds};
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::ids::SetKey;
use fleetpulse_hub::kubernetes::store::KubeStore;
use fleetpulse_hub::store::{RetrySettings, Store, StoreWriter, StoredCluster, Write};
use fleetpulse_kubesim::KubeSim;
use fleetpulse_tests::wait;

type Request = axum::http::Request<kube::client::Body>;

/// What a faulty client did: requests it refused, and PATCH requests it let through that
/// are not status writes (label patches).
#[derive(Clone, Default)]
struct Counts {
    refused: Arc<AtomicUsize>,
    patches: Arc<AtomicUsize>,
}

/// A client to `sim` that answers `503 Service Unavailable` to every request `refuse`
/// picks, counting what it does in `counts`.
fn faulty_client(
    sim: &KubeSim,
    refuse: impl Fn(&Request) -> bool + Clone + Send + Sync + 'static,
    counts: Counts,
) -> kube::Client {
    let router = sim.router();
    let service = tower::service_fn(move |request: Request| {
        let (router, refuse, counts) = (router.clone(), refuse.clone(), counts.clone());
        async move {
            if refuse(&request) {
                counts.refused.fetch_add(1, Ordering::SeqCst);
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": "the API server is down (test)", "reason": "ServiceUnavailable",
                    "code": 503});
                return Ok(Response::builder()
                    .status(StatusCode::SERVICE_UNAVAILABLE)
                    .header("content-type", "application/json")
                    .body(Body::from(status.to_string()))
                    .expect("a valid response"));
            }
            let status_write = request.uri().path().ends_with("/status");
            if !status_write && request.method() == axum::http::Method::PATCH {
                counts.patches.fetch_add(1, Ordering::SeqCst);
            }
            router.oneshot(request).await
        }
    });
    kube::Client::new(service, "default")
}

/// A kubesim with the hub's CRDs, and an admin client to it.
async fn sim_with_crds() -> anyhow::Result<(KubeSim, kube::Client)> {
    let sim = KubeSim::new();
    let admin = sim.client();
    for crd in crds::all() {
        Api::<CustomResourceDefinition>::all(admin.clone())
            .create(&PostParams::default(), &crd)
            .await?;
    }
    Ok((sim, admin))
}

/// A store writer over `client` that retries quickly.
async fn writer(client: kube::Client) -> anyhow::Result<StoreWriter> {
    let mut store = KubeStore::new(client, tokio::runtime::Handle::current(), None);
    let store = tokio::task::spawn_blocking(move || store.load().map(|_| store)).await??;
    let retry = RetrySettings {
        first: Duration::from_millis(20),
        max: Duration::from_millis(100),
    };
    Ok(StoreWriter::spawn_with(store, retry))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_write_refused_during_an_outage_is_written_when_the_api_returns()
-> anyhow::Result<()> {
    let (sim, admin) = sim_with_crds().await?;
    let clusters: Api<MemberCluster> = Api::namespaced(admin.clone(), "default");
    let mc: MemberCluster = serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "MemberCluster",
        "metadata": {"name": "edge", "namespace": "default"},
        "spec": {"heartbeat": {"intervalSeconds": 10, "gracePeriodSeconds": 40}}
    }))?;
    clusters.create(&PostParams::default(), &mc).await?;

    let down = Arc::new(AtomicBool::new(false));
    let refuse = {
        let down = down.clone();
        move |_: &Request| down.load(Ordering::SeqCst)
    };
    let writer = writer(faulty_client(&sim, refuse, Counts::default())).await?;

    down.store(true, Ordering::SeqCst);
    let mut record = StoredCluster::default();
    record.status.config_generation = Some(7);
    writer.send(vec![Write::Cluster {
        cluster: ClusterId::new("default", "edge"),
        record,
    }]);
    // Returns once the write was tried (and refused).
    let sync = writer.clone();
    tokio::task::spawn_blocking(move || sync.sync()).await?;
    let status = clusters.get("edge").await?.status;
    assert_eq!(status.and_then(|s| s.config_generation), None);

    down.store(false, Ordering::SeqCst);
    wait::until_some(
        "the refused status write to reach the API",
        Duration::from_secs(20),
        || {
            let clusters = clusters.clone();
            async move {
                let mc = clusters.get("edge").await.ok()?;
                (mc.status?.config_generation == Some(7)).then_some(())
            }
        },
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_write_retried_after_its_status_was_refused_labels_once_and_publishes_once()
-> anyhow::Result<()> {
    let (sim, admin) = sim_with_crds().await?;
    let clusters: Api<MemberCluster> = Api::namespaced(admin.clone(), "default");
    let mc: MemberCluster = serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "MemberCluster",
        "metadata": {"name": "a", "namespace": "default"}, "spec": {}
    }))?;
    clusters.create(&PostParams::default(), &mc).await?;
    let sets: Api<ClusterSet> = Api::all(admin.clone());
    let set: ClusterSet = serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet",
        "metadata": {"name": "primary"}, "spec": {"maxReplicas": 1}
    }))?;
    sets.create(&PostParams::default(), &set).await?;

    let down = Arc::new(AtomicBool::new(true));
    let refuse = {
        let down = down.clone();
        move |r: &Request| r.uri().path().ends_with("/status") && down.load(Ordering::SeqCst)
    };
    let counts = Counts::default();
    let writer = writer(faulty_client(&sim, refuse, counts.clone())).await?;
    let key = SetKey::ClusterSet("primary".into());
    let status = SetStatus {
        selected_cluster_refs: vec![ClusterRef {
            namespace: Some("default".into()),
            name: "a".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    writer.send(vec![Write::Set {
        key: key.clone(),
        status,
    }]);
    // The label is written; the status is refused, and the batch tried again and again.
    let label = key.label_key();
    wait::until_some("the membership label on a", Duration::from_secs(20), || {
        let (clusters, label) = (clusters.clone(), label.clone());
        async move {
            let mc = clusters.get("a").await.ok()?;
            mc.metadata.labels?.contains_key(&label).then_some(())
        }
    })
    .await?;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(admin.clone());
    let selected = || {
        let events = events.clone();
        async move {
            let list = events.list(&Default::default()).await.ok()?;
            let n = (list.items.iter())
                .filter(|e| e.reason.as_deref() == Some("Selected"))
                .count();
            Some(n)
        }
    };
    wait::until_some(
        "three refused tries of the batch",
        Duration::from_secs(20),
        || async { (counts.refused.load(Ordering::SeqCst) >= 3).then_some(()) },
    )
    .await?;
    assert_eq!(
        selected().await,
        Some(0),
        "no Event before the status is written"
    );
    assert!(
        sets.get("primary")
            .await?
            .status
            .is_none_or(|s| s.selected_cluster_refs.is_empty())
    );

    down.store(false, Ordering::SeqCst);
    wait::until_some("the Selected Event", Duration::from_secs(20), || async {
        (selected().await? > 0).then_some(())
    })
    .await?;
    let written = sets.get("primary").await?.status.unwrap_or_default();
    assert_eq!(written.selected_cluster_refs.len(), 1);
    assert_eq!(
        counts.patches.load(Ordering::SeqCst),
        1,
        "the label was patched once, not per try"
    );
    assert_eq!(selected().await, Some(1), "one Event for one change");
    Ok(())
}

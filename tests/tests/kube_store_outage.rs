//! The Kubernetes store through an API server outage: a status write refused while the API
//! is down reaches it once the API is back, though no further write is queued (the store's
//! writer retries on its own), through the real `kube` client against kubesim.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Response, StatusCode};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::json;
use tower::ServiceExt;

use fleetpulse_common::api::{MemberCluster, crds};
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::kubernetes::store::KubeStore;
use fleetpulse_hub::store::{RetrySettings, Store, StoreWriter, StoredCluster, Write};
use fleetpulse_kubesim::KubeSim;
use fleetpulse_tests::wait;

/// A client to `sim` that gets `503 Service Unavailable` for every request while `down`.
fn flaky_client(sim: &KubeSim, down: Arc<AtomicBool>) -> kube::Client {
    let router = sim.router();
    let service = tower::service_fn(move |request| {
        let (router, down) = (router.clone(), down.clone());
        async move {
            if down.load(Ordering::SeqCst) {
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": "the API server is down (test)", "reason": "ServiceUnavailable",
                    "code": 503});
                return Ok(Response::builder()
                    .status(StatusCode::SERVICE_UNAVAILABLE)
                    .header("content-type", "application/json")
                    .body(Body::from(status.to_string()))
                    .expect("a valid response"));
            }
            router.oneshot(request).await
        }
    });
    kube::Client::new(service, "default")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_write_refused_during_an_outage_is_written_when_the_api_returns()
-> anyhow::Result<()> {
    let sim = KubeSim::new();
    let admin = sim.client();
    for crd in crds::all() {
        Api::<CustomResourceDefinition>::all(admin.clone())
            .create(&PostParams::default(), &crd)
            .await?;
    }
    let clusters: Api<MemberCluster> = Api::namespaced(admin.clone(), "default");
    let mc: MemberCluster = serde_json::from_value(json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "MemberCluster",
        "metadata": {"name": "edge", "namespace": "default"},
        "spec": {"heartbeat": {"intervalSeconds": 10, "gracePeriodSeconds": 40}}
    }))?;
    clusters.create(&PostParams::default(), &mc).await?;

    let down = Arc::new(AtomicBool::new(false));
    let mut store = KubeStore::new(
        flaky_client(&sim, down.clone()),
        tokio::runtime::Handle::current(),
        None,
    );
    let store = tokio::task::spawn_blocking(move || store.load().map(|_| store)).await??;
    let writer = StoreWriter::spawn_with(
        store,
        RetrySettings {
            first: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
    );

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

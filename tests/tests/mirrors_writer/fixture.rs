//! The harness of the mirror writer tests: a kubesim with the mirrored tools' test CRDs
//! and a running mirror task, and helpers that create, read and count mirror objects.

use std::time::Duration;

use fleetpulse_common::api::MirrorRef;
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::mirrors::{
    MirrorChange, MirrorInput, MirrorKind, MirrorState, Mirrors, MirrorsHandle,
};
use fleetpulse_kubesim::{KubeSim, eventually};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;

pub use fleetpulse_tests::mirror_objects::*;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

pub const WAIT: Duration = Duration::from_secs(30);
pub const HEALTHY: &str = "health.fleetpulse.io/healthy";
pub const REACHABLE: &str = "health.fleetpulse.io/reachable";
pub const PROD: &str = "clusterset.fleetpulse.io/prod";

pub struct Fixture {
    pub sim: KubeSim,
    pub handle: MirrorsHandle,
    pub changes: UnboundedReceiver<MirrorChange>,
    pub stop: CancellationToken,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub async fn fixture(resync: Duration) -> Fixture {
    let sim = KubeSim::new();
    install_crds(&sim.client()).await.unwrap();
    let namespaces: Api<Namespace> = Api::all(sim.client());
    for ns in ["fleet", "argocd"] {
        let body: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        namespaces
            .create(&PostParams::default(), &body)
            .await
            .unwrap();
    }
    let stop = CancellationToken::new();
    let (handle, changes) = Mirrors::spawn(Some(sim.client()), resync, stop.clone());
    Fixture {
        sim,
        handle,
        changes,
        stop,
    }
}

pub fn input(reachable: bool, healthy: bool, sets: &[&str]) -> MirrorInput {
    MirrorInput {
        reachable,
        healthy,
        memberships: sets.iter().map(|s| (*s).to_owned()).collect(),
    }
}

pub fn mirror(kind: MirrorKind, name: &str, ns: Option<&str>) -> MirrorRef {
    let mut m = MirrorRef::new(kind.api_version(), kind.kind(), name);
    m.namespace = ns.map(str::to_owned);
    m
}

pub fn cluster(name: &str) -> ClusterId {
    ClusterId::new("fleet", name)
}

/// Waits until every mirror of `cluster` is in `state`.
pub async fn settled(f: &Fixture, cluster: &ClusterId, state: MirrorState) {
    let done = eventually(WAIT, || async {
        let s = f.handle.status(cluster);
        (!s.is_empty() && s.iter().all(|m| m.state == state)).then_some(())
    })
    .await;
    assert!(
        done.is_some(),
        "{cluster:?} never reached {state:?}: {:?}",
        f.handle.status(cluster)
    );
}

pub async fn next_change(f: &mut Fixture) -> MirrorChange {
    tokio::time::timeout(WAIT, f.changes.recv())
        .await
        .expect("a Mirrored change within the deadline")
        .expect("the mirror task is running")
}

pub fn patches(sim: &KubeSim, resource: &str) -> u64 {
    sim.write_count(resource, "patch")
}

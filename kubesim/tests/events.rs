//! kube-runtime's event `Recorder` works against kubesim: the first publish creates an
//! `events.k8s.io/v1` Event, a repeat patches it as a series.

use fleetpulse_kubesim::KubeSim;
use k8s_openapi::api::{core::v1::ObjectReference, events::v1::Event as K8sEvent};
use kube::{
    Api,
    api::ListParams,
    runtime::events::{Event, EventType, Recorder, Reporter},
};

#[tokio::test]
async fn recorder_creates_event_then_patches_series() {
    let sim = KubeSim::new();
    let reporter = Reporter {
        controller: "fleetpulse-hub".into(),
        instance: None,
    };
    let recorder = Recorder::new(sim.client(), reporter);
    let reference = ObjectReference {
        kind: Some("Namespace".into()),
        name: Some("kube-system".into()),
        namespace: Some("default".into()),
        ..Default::default()
    };
    let ev = Event {
        type_: EventType::Warning,
        reason: "ClusterUnhealthy".into(),
        note: Some("3 checks failing".into()),
        action: "Evaluate".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();

    assert_eq!(sim.write_count("events", "create"), 1);
    assert_eq!(sim.write_count("events", "patch"), 1);
    let events: Api<K8sEvent> = Api::namespaced(sim.client(), "default");
    let listed = events.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].series.as_ref().map(|s| s.count), Some(2));
    assert!(
        sim.requests()
            .iter()
            .any(|r| r.group == "events.k8s.io" && r.verb == "create")
    );
}

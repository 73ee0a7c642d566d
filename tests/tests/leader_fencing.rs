//! Leader fencing in Kubernetes mode: a leader whose Lease renewals the API server refuses
//! stops leading, and so writing, within its renew deadline: before the Lease can expire
//! for a standby, so two replicas never write at once.

use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::Api;

use fleetpulse_hub::kubernetes::leader::{LeaderSettings, Lost};
use fleetpulse_hub::server::{Hub, HubError};
use fleetpulse_kubesim::{KubeSim, eventually};
use fleetpulse_tests::management::{hub_options, management_cluster};

const LEASE: &str = "fleetpulse-hub";

async fn lease(leases: &Api<Lease>) -> LeaseSpec {
    leases.get(LEASE).await.unwrap().spec.unwrap_or_default()
}

/// When the Lease as stored expires for a standby: its renew time plus its duration.
fn expiry(spec: &LeaseSpec) -> SystemTime {
    let renewed: SystemTime = spec.renew_time.as_ref().expect("a renewed lease").0.into();
    renewed + Duration::from_secs(spec.lease_duration_seconds.unwrap_or_default() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_its_lease_stops_before_the_lease_expires_for_others() {
    let sim = KubeSim::new();
    let client = sim.client();
    management_cluster(&client, &["edge-1"]).await;
    let settings = LeaderSettings {
        namespace: "fleet".into(),
        name: LEASE.into(),
        identity: "hub-a".into(),
        duration: Duration::from_secs(6),
        pod: None,
    };
    let mut options = hub_options(&client);
    options.leader = Some(settings.clone());
    let hub = Hub::start(options).await.unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "fleet");
    let acquired = lease(&leases).await;
    assert_eq!(acquired.holder_identity.as_deref(), Some("hub-a"));
    // Renewals land while the API server takes them.
    let renewed = eventually(Duration::from_secs(20), || async {
        let now = lease(&leases).await;
        (now.renew_time != acquired.renew_time).then_some(now)
    })
    .await
    .expect("the leader renews its lease");

    sim.refuse("leases", "patch", true);
    let refused = Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        hub.run_until(std::future::pending()),
    )
    .await
    .expect("the leader stops by itself when its renewals fail");
    let stopped = SystemTime::now();
    assert!(
        matches!(
            outcome,
            Err(HubError::LostLeadership(Lost::NotRenewed { .. }))
        ),
        "stopped for failing to renew: {outcome:?}"
    );
    let last = lease(&leases).await;
    assert_eq!(last.holder_identity.as_deref(), Some("hub-a"));
    assert!(
        last.renew_time >= renewed.renew_time,
        "no renewal was taken after the refusal began"
    );
    assert!(
        stopped < expiry(&last),
        "stopped {:?} before the lease expires for a standby",
        expiry(&last).duration_since(stopped).unwrap_or_default()
    );
    assert!(
        refused.elapsed() >= settings.renew_deadline() / 2,
        "a refused renewal is retried before giving up, not fatal at once"
    );
}

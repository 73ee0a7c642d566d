//! ClusterSet failover end to end: an embedded hub on loopback HTTPS, three agents, a
//! ClusterSet with `maxReplicas: 1`; the selected cluster's agent stops and the set fails
//! over, as `fleetpulse-hub get clustersets -o json` (the real binary) shows.

use std::time::Duration;

use fleetpulse_common::api::ClusterSet;
use fleetpulse_common::api::condition::{HEALTHY, Status};
use fleetpulse_tests::process;
use fleetpulse_tests::scenario::Scenario;
use fleetpulse_tests::{fleet, wait};

fn cluster_sets(s: &Scenario) -> anyhow::Result<Vec<ClusterSet>> {
    let ca = s.pki.ca_cert.display().to_string();
    let server = s.admin_url.as_str().trim_end_matches('/').to_owned();
    let out = process::run(
        "fleetpulse-hub",
        &[
            "get",
            "clustersets",
            "-o",
            "json",
            "--server",
            &server,
            "--ca",
            &ca,
        ],
    )?;
    let list: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    Ok(serde_json::from_value(list["items"].clone())?)
}

fn selected(sets: &[ClusterSet]) -> Vec<String> {
    sets.iter()
        .flat_map(|cs| {
            cs.status
                .iter()
                .flat_map(|s| s.selected_cluster_refs.iter().map(|r| r.name.clone()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_set_fails_over_when_its_selected_clusters_agent_stops() -> anyhow::Result<()> {
    let mut s = Scenario::start(3, 1, 3).await?;
    s.write_manifest("sets.yaml", fleet::PRIMARY_CLUSTER_SET)?;
    for i in 0..3 {
        s.start_agent(i)?;
    }
    wait::until(
        "all three clusters Healthy",
        Duration::from_secs(20),
        || (0..3).all(|i| s.condition(i, HEALTHY) == Status::True),
    )
    .await?;
    let first = {
        let mut first = vec![];
        wait::until(
            "the ClusterSet selects one cluster",
            Duration::from_secs(20),
            || {
                first = selected(&s.hub().fleet.cluster_sets());
                first.len() == 1
            },
        )
        .await?;
        first.remove(0)
    };
    let via_cli = cluster_sets(&s)?;
    assert_eq!(selected(&via_cli), std::slice::from_ref(&first));
    let labels = s
        .member_clusters()
        .into_iter()
        .find(|m| m.metadata.name.as_deref() == Some(first.as_str()))
        .unwrap()
        .metadata
        .labels
        .unwrap();
    assert_eq!(
        labels
            .get("clusterset.fleetpulse.io/primary")
            .map(String::as_str),
        Some("selected")
    );

    let victim = s
        .clusters
        .iter()
        .position(|c| c.id.name == first)
        .expect("a known cluster");
    s.stop_agent(victim).await?;
    let mut after = vec![];
    let s_ref = &s;
    wait::until(
        "the ClusterSet to fail over",
        Duration::from_secs(20),
        || {
            after = cluster_sets(s_ref)
                .map(|sets| selected(&sets))
                .unwrap_or_default();
            after.len() == 1 && after[0] != first
        },
    )
    .await?;
    let sets = cluster_sets(&s)?;
    let status = sets[0].status.clone().expect("status");
    let reason = status.last_failover_reason.expect("a failover reason");
    assert!(
        reason.contains(&first) && reason.contains(&after[0]),
        "{reason}"
    );
    let satisfied = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Satisfied")
        .expect("Satisfied");
    assert_eq!(satisfied.status, "True");
    s.shutdown().await
}

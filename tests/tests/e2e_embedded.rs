//! End to end, in one process: an embedded hub on loopback HTTPS (certificates generated
//! here) and three agents. Covers failure detection, the startup grace after a hub restart,
//! and replay protection that survives the restart.

use std::time::{Duration, Instant};

use fleetpulse_agent::report::sign_report;
use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, READY, Status};
use fleetpulse_common::protocol::errors::{ErrorBody, RejectCode};
use fleetpulse_common::protocol::report::{HeartbeatReport, SCHEMA_VERSION, Summary};
use fleetpulse_common::protocol::{CONTENT_TYPE_JOSE, heartbeat_path};
use fleetpulse_tests::scenario::Scenario;
use fleetpulse_tests::wait;

const INTERVAL: u32 = 1;
const GRACE: u32 = 3;

fn secs(s: u32) -> Duration {
    Duration::from_secs(s.into())
}

/// Slack for the detector's 1 s tick and scheduling on a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(2);

async fn post_report(s: &Scenario, i: usize, jws: &str) -> reqwest::Response {
    let ca = std::fs::read(&s.pki.ca_cert).unwrap();
    let tls = fleetpulse_agent::tls::client_config(Some(&ca)).unwrap();
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()
        .unwrap();
    let id = &s.clusters[i].id;
    let url = s
        .url
        .join(&heartbeat_path(&id.namespace, &id.name))
        .unwrap();
    client
        .post(url)
        .header("content-type", CONTENT_TYPE_JOSE)
        .body(jws.to_owned())
        .send()
        .await
        .unwrap()
}

fn hand_made_report(s: &Scenario, i: usize, incarnation: u64, seq: u64) -> HeartbeatReport {
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    HeartbeatReport {
        schema_version: SCHEMA_VERSION,
        aud: "fleetpulse".into(),
        cluster: s.clusters[i].id.clone(),
        cluster_uid: "uid-manual".into(),
        agent_version: "manual".into(),
        incarnation,
        seq,
        iat: now,
        exp: now + 300,
        interval_seconds: INTERVAL,
        config_generation: 0,
        checks: vec![],
        summary: Summary::of(&[]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_agents_report_one_stops_and_the_hub_restarts_without_false_alarms()
-> anyhow::Result<()> {
    // Cluster 3 (index 3) has no agent: the test signs its reports by hand.
    let mut s = Scenario::start(4, INTERVAL, GRACE).await?;
    for i in 0..3 {
        s.start_agent(i)?;
    }
    wait::until(
        "three agent clusters Reachable, Ready and Healthy",
        secs(20),
        || {
            (0..3).all(|i| {
                [REACHABLE, READY, HEALTHY]
                    .iter()
                    .all(|t| s.condition(i, t) == Status::True)
            })
        },
    )
    .await?;

    // One agent stops: its cluster turns unreachable within grace + one interval; the
    // others never waver.
    s.stop_agent(2).await?;
    let stopped = Instant::now();
    wait::until(
        "cluster 2 unreachable",
        secs(GRACE + INTERVAL) + SLACK,
        || {
            assert_eq!(s.condition(0, REACHABLE), Status::True, "cluster 0 wavered");
            assert_eq!(s.condition(1, REACHABLE), Status::True, "cluster 1 wavered");
            s.condition(2, REACHABLE) == Status::False
        },
    )
    .await?;
    assert!(
        stopped.elapsed() >= secs(GRACE) - Duration::from_millis(900),
        "marked before its grace period ran out"
    );
    assert_eq!(s.condition(2, HEALTHY), Status::False);
    assert_eq!(s.condition(2, READY), Status::True, "Ready is latched");

    // A hand-signed report for cluster 3 is accepted before the restart...
    let captured = sign_report(
        &s.clusters[3].key,
        &hand_made_report(&s, 3, u64::MAX / 2, 1),
    );
    assert_eq!(post_report(&s, 3, &captured).await.status(), 200);

    // The hub restarts while cluster 1's agent also goes away.
    s.stop_hub().await;
    s.stop_agent(1).await?;
    s.start_hub().await?;
    let restarted = Instant::now();

    // ...and its replay is refused after it: positions survived the restart.
    let replay = post_report(&s, 3, &captured).await;
    assert_eq!(replay.status(), 409);
    let body: ErrorBody = replay.json().await?;
    assert_eq!(body.code, RejectCode::Replayed);

    // Startup grace: cluster 1 (silent since before the restart) keeps its persisted
    // Reachable=True for a whole grace period, then turns False; cluster 0's agent
    // reconnects and it never turns False.
    assert_eq!(
        s.condition(1, REACHABLE),
        Status::True,
        "restored from the store"
    );
    wait::until(
        "cluster 1 unreachable after the startup grace",
        secs(GRACE + INTERVAL) + SLACK,
        || {
            assert_eq!(
                s.condition(0, REACHABLE),
                Status::True,
                "cluster 0 wavered after the restart"
            );
            s.condition(1, REACHABLE) == Status::False
        },
    )
    .await?;
    assert!(
        restarted.elapsed() >= secs(GRACE) - Duration::from_millis(900),
        "judged during the startup grace"
    );
    assert_eq!(
        s.condition(2, REACHABLE),
        Status::False,
        "cluster 2 is still down"
    );
    let agent0 = s.agent(0).expect("agent 0 runs");
    let before = agent0.status().accepted_total;
    agent0
        .wait_for(secs(5), |st| st.accepted_total > before)
        .await
        .map_err(|st| anyhow::anyhow!("agent 0 did not reconnect after the restart: {st:?}"))?;
    s.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_catches_up_right_after_the_hub_returns() -> anyhow::Result<()> {
    let mut s = Scenario::start(1, INTERVAL, GRACE).await?;
    s.start_agent(0)?;
    wait::until("cluster Healthy", secs(20), || {
        s.condition(0, HEALTHY) == Status::True
    })
    .await?;
    s.stop_hub().await;
    let agent = s.agent(0).expect("agent runs");
    agent
        .wait_for(secs(10), |st| st.consecutive_failures >= 2)
        .await
        .map_err(|st| anyhow::anyhow!("agent did not notice the hub was down: {st:?}"))?;
    let accepted = agent.status().accepted_total;
    s.start_hub().await?;
    let agent = s.agent(0).expect("agent runs");
    agent
        .wait_for(secs(INTERVAL) * 30, |st| {
            st.accepted_total > accepted && st.consecutive_failures == 0
        })
        .await
        .map_err(|st| anyhow::anyhow!("agent did not catch up: {st:?}"))?;
    assert_eq!(s.condition(0, REACHABLE), Status::True);
    s.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_the_manifests_reaches_the_hub_and_the_agent_without_a_restart()
-> anyhow::Result<()> {
    let mut s = Scenario::start(1, INTERVAL, GRACE).await?;
    s.start_agent(0)?;
    let agent = s.agent(0).expect("agent runs");
    agent
        .wait_for(secs(20), |st| st.config_generation == 1)
        .await
        .map_err(|st| anyhow::anyhow!("agent did not pull the first config: {st:?}"))?;

    // A liveness check added to the cluster and a second cluster added to the directory.
    let path = fleetpulse_tests::fleet::manifest_path(&s.dir.path().join("manifests"));
    let yaml = std::fs::read_to_string(&path)?;
    let edited = yaml.replacen(
        "  agent:\n",
        "  livenessChecks:\n    - name: nodes\n      readyNodes: {minCount: 1}\n  agent:\n",
        1,
    );
    std::fs::write(&path, edited)?;
    std::fs::write(
        path.with_file_name("more.yaml"),
        "apiVersion: fleetpulse.io/v1alpha1\nkind: MemberCluster\nmetadata: {name: late, namespace: fleet}\nspec: {}\n",
    )?;

    let agent = s.agent(0).expect("agent runs");
    let status = agent
        .wait_for(secs(20), |st| st.config_generation == 2)
        .await
        .map_err(|st| anyhow::anyhow!("agent did not pull the edited config: {st:?}"))?;
    let config = status.config.expect("a pulled config");
    assert_eq!(config.liveness_checks.len(), 1);
    assert_eq!(config.liveness_checks[0].name, "nodes");
    wait::until("the added cluster served", secs(10), || {
        s.member_clusters()
            .iter()
            .any(|m| m.metadata.name.as_deref() == Some("late"))
    })
    .await?;
    s.shutdown().await
}

//! [`PodCheckRunner`] against [`FakePodApi`] on tokio's paused clock, over several runs:
//! cleanup at start, the schedule, cancellation, and the window's verdict.
//!
//! [`PodCheckRunner`]: super::runner::PodCheckRunner
//! [`FakePodApi`]: super::fake_api::FakePodApi

use std::sync::Arc;
use std::time::Duration;

use fleetpulse_common::api::check::PodCheck;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::fake_api::{FakePodApi, Script};
use super::template::{CHECK_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, ROUND_LABEL};
use super::test_fixtures::*;

#[tokio::test(start_paused = true)]
async fn leftovers_of_an_earlier_agent_are_deleted_at_start() {
    let fake = FakePodApi::default();
    let ours = json!({ MANAGED_BY_LABEL: MANAGED_BY_VALUE, CHECK_LABEL: "dns", ROUND_LABEL: "4" });
    fake.seed(NS, "fleetpulse-dns-old1", ours.clone());
    fake.seed(NS, "fleetpulse-dns-old2", ours.clone());
    fake.seed("elsewhere", "fleetpulse-dns-other-ns", ours);
    fake.seed(
        NS,
        "fleetpulse-web-1",
        json!({ MANAGED_BY_LABEL: MANAGED_BY_VALUE, CHECK_LABEL: "web" }),
    );
    fake.seed(NS, "dns-by-hand", json!({ CHECK_LABEL: "dns" }));
    let deleted = runner(&fake, &spec()).cleanup_leftovers().await;
    assert_eq!(deleted, 2);
    let mut gone = fake.state().deleted.clone();
    gone.sort();
    assert_eq!(gone, vec!["fleetpulse-dns-old1", "fleetpulse-dns-old2"]);
    assert_eq!(fake.state().pods.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn run_loop_cleans_up_then_runs_every_interval_until_cancelled() {
    let fake = FakePodApi::default();
    fake.seed(
        NS,
        "fleetpulse-dns-old",
        json!({ MANAGED_BY_LABEL: MANAGED_BY_VALUE, CHECK_LABEL: "dns" }),
    );
    let runner = Arc::new(runner(&fake, &spec()));
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let (runner, shutdown) = (runner.clone(), shutdown.clone());
        async move { runner.run(shutdown).await }
    });
    wait_until(&fake, |f| f.state().created.len() >= 3).await;
    shutdown.cancel();
    task.await.unwrap();

    let state = fake.state();
    assert_eq!(state.deleted[0], "fleetpulse-dns-old", "leftovers go first");
    let rounds: Vec<&str> = state
        .created
        .iter()
        .map(|(pod, _)| pod.metadata.labels.as_ref().unwrap()[ROUND_LABEL].as_str())
        .collect();
    assert_eq!(&rounds[..3], ["1", "2", "3"]);
    let gaps: Vec<Duration> = state.created.windows(2).map(|w| w[1].1 - w[0].1).collect();
    assert!(gaps.iter().all(|gap| *gap == 60 * S), "{gaps:?}");
    drop(state);
    assert_eq!(runner.outcome().success_rate_percent, Some(100.0));
}

#[tokio::test(start_paused = true)]
async fn cancelling_mid_run_deletes_the_run_pod() {
    let fake = FakePodApi::with_scripts([Script::Hang { log: String::new() }]);
    let runner = Arc::new(runner(&fake, &spec()));
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let (runner, shutdown) = (runner.clone(), shutdown.clone());
        async move { runner.run(shutdown).await }
    });
    wait_until(&fake, |f| !f.state().created.is_empty()).await;
    shutdown.cancel();
    task.await.unwrap();
    let state = fake.state();
    let name = state.created[0].0.metadata.name.clone().unwrap();
    assert_eq!(state.deleted, vec![name]);
    assert!(state.pods.is_empty());
}

#[tokio::test(start_paused = true)]
async fn window_verdict_after_several_runs_reports_rate_and_last_failure() {
    // 3 of 5 succeed: 60% < 80%, never 3 failures in a row.
    let fake = FakePodApi::with_scripts([succeed(), fail(1), succeed(), succeed(), fail(2)]);
    let runner = runner(&fake, &spec());
    for round in 1..=5 {
        runner.run_round(round).await;
    }
    let outcome = runner.outcome();
    assert!(!outcome.passing);
    assert_eq!(outcome.success_rate_percent, Some(60.0));
    assert!(
        outcome.message.starts_with(
            "success rate 60.0% (3 of 5 runs in the last 600s) is below the threshold of 80%; \
             last failure: run 5 (pod fleetpulse-dns-5) failed: container \"check\" exited"
        ),
        "{}",
        outcome.message
    );
}

#[tokio::test(start_paused = true)]
async fn consecutive_failures_fail_the_check_and_a_success_clears_them() {
    let spec = PodCheck {
        success_rate_threshold_percent: Some(0),
        consecutive_failure_threshold: Some(2),
        ..spec()
    };
    let fake = FakePodApi::with_scripts([fail(1), fail(1), succeed()]);
    let runner = runner(&fake, &spec);
    runner.run_round(1).await;
    assert!(
        runner.outcome().passing,
        "one failure is below the threshold of 2"
    );
    runner.run_round(2).await;
    let outcome = runner.outcome();
    assert!(!outcome.passing);
    assert!(
        outcome.message.starts_with("the last 2 runs failed"),
        "{}",
        outcome.message
    );
    runner.run_round(3).await;
    assert!(runner.outcome().passing);
}

//! [`PodCheckRunner`] against [`FakePodApi`] on tokio's paused clock, one run at a time:
//! success, failure with its log, pods that never start, timeouts. Every wait is virtual.
//!
//! [`PodCheckRunner`]: super::runner::PodCheckRunner
//! [`FakePodApi`]: super::fake_api::FakePodApi

use fleetpulse_common::api::check::PodCheck;
use k8s_openapi::api::core::v1::PodStatus;
use serde_json::json;
use tokio::time::Instant;

use super::fake_api::{FakePodApi, Script};
use super::template::{CHECK_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, ROUND_LABEL};
use super::test_fixtures::*;

#[tokio::test(start_paused = true)]
async fn no_run_yet_is_not_passing() {
    let fake = FakePodApi::default();
    let outcome = runner(&fake, &spec()).outcome();
    assert!(!outcome.passing);
    assert_eq!(outcome.message, "no run completed yet");
    assert_eq!(outcome.success_rate_percent, None);
}

#[tokio::test(start_paused = true)]
async fn successful_run_passes_and_its_pod_is_deleted() {
    let fake = FakePodApi::with_scripts([succeed()]);
    let runner = runner(&fake, &spec());
    let report = runner.run_round(1).await;
    assert!(report.success, "{}", report.message);
    let pod = report.pod.clone().unwrap();
    assert_eq!(report.message, format!("run 1 (pod {pod}) succeeded in 4s"));

    let state = fake.state();
    let (created, _) = &state.created[0];
    assert!(pod.starts_with("fleetpulse-dns-"));
    assert_eq!(created.metadata.namespace.as_deref(), Some(NS));
    let labels = created.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[MANAGED_BY_LABEL], MANAGED_BY_VALUE);
    assert_eq!(labels[CHECK_LABEL], "dns");
    assert_eq!(labels[ROUND_LABEL], "1");
    let restart = created.spec.as_ref().unwrap().restart_policy.as_deref();
    assert_eq!(restart, Some("Never"));
    assert_eq!(state.deleted, vec![pod]);
    assert!(state.pods.is_empty());
    drop(state);

    let outcome = runner.outcome();
    assert!(outcome.passing, "{}", outcome.message);
    assert_eq!(outcome.success_rate_percent, Some(100.0));
}

#[tokio::test(start_paused = true)]
async fn failed_run_carries_the_log_tail_and_its_pod_is_kept_until_the_next_run() {
    let fake = FakePodApi::with_scripts([fail(30), succeed()]);
    let runner = runner(&fake, &spec());
    let failed = runner.run_round(1).await;
    assert!(!failed.success);
    let pod = failed.pod.clone().unwrap();
    assert!(
        failed.message.starts_with(&format!(
            "run 1 (pod {pod}) failed: container \"check\" exited with code 1 (Error); \
             last log lines of \"check\":\nline 11\n"
        )),
        "{}",
        failed.message
    );
    assert!(failed.message.ends_with("line 30"), "{}", failed.message);
    assert_eq!(
        fake.state().log_reads,
        vec![(pod.clone(), "check".into(), 20)]
    );
    assert!(
        fake.state().deleted.is_empty(),
        "the failed pod is kept for debugging"
    );

    let next = runner.run_round(2).await;
    assert!(next.success);
    let deleted = fake.state().deleted.clone();
    assert_eq!(deleted, vec![pod, next.pod.unwrap()]);
}

#[tokio::test(start_paused = true)]
async fn unschedulable_pod_fails_at_the_run_timeout_with_the_scheduler_message() {
    let fake = FakePodApi::with_scripts([stuck(json!({ "phase": "Pending", "conditions": [
        { "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
          "message": "0/3 nodes are available: 3 Insufficient cpu." }
    ]}))]);
    let spec = PodCheck {
        run_timeout_seconds: Some(90),
        ..spec()
    };
    let runner = runner(&fake, &spec);
    let started = Instant::now();
    let report = runner.run_round(1).await;
    assert_eq!(started.elapsed(), 90 * S);
    assert!(!report.success);
    assert!(
        report.message.ends_with(
            "failed: did not finish within 90s; last seen: pod is unschedulable: 0/3 nodes are \
             available: 3 Insufficient cpu."
        ),
        "{}",
        report.message
    );
    assert!(fake.state().log_reads.is_empty(), "no container started");
    assert_eq!(fake.state().deleted, vec![report.pod.unwrap()]);
}

#[tokio::test(start_paused = true)]
async fn image_pull_backoff_fails_after_the_start_grace_not_the_timeout() {
    let fake =
        FakePodApi::with_scripts([stuck(json!({ "phase": "Pending", "containerStatuses": [
            { "name": "check", "image": "nope", "imageID": "", "ready": false, "restartCount": 0,
              "state": { "waiting": { "reason": "ImagePullBackOff",
                                      "message": "Back-off pulling image \"nope\"" } } }
        ]}))]);
    let runner = runner(&fake, &spec());
    let started = Instant::now();
    let report = runner.run_round(1).await;
    assert_eq!(started.elapsed(), 30 * S);
    assert!(
        report.message.ends_with(
            "failed: container \"check\" cannot start: ImagePullBackOff: Back-off pulling image \
             \"nope\" (for 30s)"
        ),
        "{}",
        report.message
    );
    assert_eq!(fake.state().deleted, vec![report.pod.unwrap()]);
}

#[tokio::test(start_paused = true)]
async fn alternating_image_pull_errors_still_fail_after_the_start_grace() {
    let waiting = |reason: &str| {
        serde_json::from_value::<PodStatus>(json!({ "phase": "Pending", "containerStatuses": [
            { "name": "check", "image": "nope", "imageID": "", "ready": false,
              "restartCount": 0, "state": { "waiting": { "reason": reason } } }
        ]}))
        .unwrap()
    };
    let statuses = vec![waiting("ErrImagePull"), waiting("ImagePullBackOff")];
    let fake = FakePodApi::with_scripts([Script::Cycle {
        statuses,
        every: 5 * S,
    }]);
    let runner = runner(&fake, &spec());
    let started = Instant::now();
    let report = runner.run_round(1).await;
    assert_eq!(started.elapsed(), 30 * S);
    assert!(report.message.ends_with("(for 30s)"), "{}", report.message);
}

#[tokio::test(start_paused = true)]
async fn hanging_pod_times_out_with_its_log_and_is_deleted() {
    let log = "waiting for dns\n".to_owned();
    let fake = FakePodApi::with_scripts([Script::Hang { log }]);
    let runner = runner(&fake, &spec());
    let report = runner.run_round(1).await;
    assert!(
        report.message.ends_with(
            "failed: did not finish within 120s; last seen: Running; last log lines of \
             \"check\":\nwaiting for dns"
        ),
        "{}",
        report.message
    );
    assert_eq!(fake.state().deleted, vec![report.pod.unwrap()]);
}

#[tokio::test(start_paused = true)]
async fn forbidden_create_is_a_failed_run_naming_the_rbac_fix() {
    let fake = FakePodApi::default();
    fake.state().forbid_create = true;
    let runner = runner(&fake, &spec());
    let report = runner.run_round(1).await;
    assert!(!report.success);
    assert_eq!(report.pod, None);
    assert!(
        report
            .message
            .starts_with("run 1 failed: the agent may not create pods in namespace")
            && report
                .message
                .contains("grant its service account `create` on `pods`"),
        "{}",
        report.message
    );
}

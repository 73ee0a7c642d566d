//! What a look at a check pod says about its run (pure): finished, failed (and which
//! container's log to show), not starting (and how long that may last), or still going.
//!
//! A pod that does not start is sorted by how likely waiting helps:
//! - [`StartWait::FailNow`]: `InvalidImageName`, `ErrImageNeverPull`: no retry fixes them.
//! - [`StartWait::Grace`]: `ErrImagePull`, `ImagePullBackOff`, `CreateContainerConfigError`
//!   (a missing Secret or ConfigMap), `CreateContainerError`, `RunContainerError`, ...:
//!   a registry blip or a Secret being created may clear them, so the run fails once the
//!   pod has been failing to start without a break for the runner's grace (30 s by
//!   default), whichever of these reasons it shows (the kubelet alternates `ErrImagePull`
//!   and `ImagePullBackOff`).
//! - [`StartWait::UntilTimeout`]: `Unschedulable`: a cluster autoscaler may add a node
//!   within the run timeout, so the run fails only at the timeout, with the scheduler's
//!   message.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// How long a pod that does not start is waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartWait {
    /// Fail the run at once.
    FailNow,
    /// Fail once the same reason has lasted the grace period.
    Grace,
    /// Wait until the run timeout.
    UntilTimeout,
}

/// The state of a check pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodProgress {
    /// Phase `Succeeded`: every container exited 0.
    Succeeded,
    /// Phase `Failed`.
    Failed {
        /// What failed, e.g. `container "check" exited with code 1 (Error)`.
        detail: String,
        /// The container whose log explains it.
        log_container: Option<String>,
    },
    /// The pod cannot start.
    NotStarting {
        /// The reason alone (`ImagePullBackOff`, `Unschedulable`), to notice a change.
        reason: String,
        /// The reason with its message and container.
        detail: String,
        /// How long to wait.
        wait: StartWait,
    },
    /// Pending or running, nothing wrong seen yet.
    InProgress {
        /// e.g. `Pending: ContainerCreating` or `Running`.
        detail: String,
    },
}

/// Waiting reasons that no retry fixes.
const FAIL_NOW: &[&str] = &["InvalidImageName", "ErrImageNeverPull"];
/// Waiting reasons that may clear on their own, given a little time.
const GRACE: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "PreCreateHookError",
    "PostStartHookError",
    "CrashLoopBackOff",
];

/// Reads the state of a check pod from its status.
pub fn observe(pod: &Pod) -> PodProgress {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    match phase {
        "Succeeded" => return PodProgress::Succeeded,
        "Failed" => return failed(pod),
        _ => {}
    }
    let mut waiting_detail = None;
    for container in statuses(pod) {
        let Some(waiting) = container.state.as_ref().and_then(|s| s.waiting.as_ref()) else {
            continue;
        };
        let reason = waiting.reason.as_deref().unwrap_or_default();
        let wait = if FAIL_NOW.contains(&reason) {
            StartWait::FailNow
        } else if GRACE.contains(&reason) {
            StartWait::Grace
        } else {
            waiting_detail.get_or_insert_with(|| reason.to_owned());
            continue;
        };
        let message = waiting.message.as_deref().map(|m| format!(": {m}"));
        return PodProgress::NotStarting {
            reason: reason.to_owned(),
            detail: format!(
                "container {:?} cannot start: {reason}{}",
                container.name,
                message.unwrap_or_default()
            ),
            wait,
        };
    }
    let unschedulable = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        });
    if let Some(condition) = unschedulable {
        let message = condition.message.as_deref().map(|m| format!(": {m}"));
        return PodProgress::NotStarting {
            reason: "Unschedulable".to_owned(),
            detail: format!("pod is unschedulable{}", message.unwrap_or_default()),
            wait: StartWait::UntilTimeout,
        };
    }
    let detail = match waiting_detail.filter(|r| !r.is_empty()) {
        Some(reason) => format!("{phase}: {reason}"),
        None => phase.to_owned(),
    };
    PodProgress::InProgress { detail }
}

/// The container whose log is worth showing for a pod that has not finished: the first
/// one that has started (running or terminated), init containers first.
pub fn started_container(pod: &Pod) -> Option<String> {
    statuses(pod)
        .find(|c| {
            c.state
                .as_ref()
                .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
        })
        .map(|c| c.name.clone())
}

fn failed(pod: &Pod) -> PodProgress {
    let crashed = statuses(pod).find_map(|c| {
        let terminated = c.state.as_ref()?.terminated.as_ref()?;
        (terminated.exit_code != 0).then_some((c, terminated))
    });
    if let Some((container, terminated)) = crashed {
        let reason = terminated
            .reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        let message = terminated
            .message
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        return PodProgress::Failed {
            detail: format!(
                "container {:?} exited with code {}{reason}{message}",
                container.name, terminated.exit_code
            ),
            log_container: Some(container.name.clone()),
        };
    }
    let status = pod.status.as_ref();
    let reason = status.and_then(|s| s.reason.as_deref());
    let message = status.and_then(|s| s.message.as_deref());
    let detail = match (reason, message) {
        (Some(r), Some(m)) => format!("pod failed: {r}: {m}"),
        (Some(one), None) | (None, Some(one)) => format!("pod failed: {one}"),
        (None, None) => "pod failed".to_owned(),
    };
    PodProgress::Failed {
        detail,
        log_container: started_container(pod),
    }
}

/// Init container statuses, then container statuses.
fn statuses(pod: &Pod) -> impl Iterator<Item = &ContainerStatus> {
    let status = pod.status.as_ref();
    let init = status.and_then(|s| s.init_container_statuses.as_deref());
    let main = status.and_then(|s| s.container_statuses.as_deref());
    init.unwrap_or_default()
        .iter()
        .chain(main.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({ "metadata": { "name": "p" }, "status": status })).unwrap()
    }

    #[test]
    fn failed_pod_names_the_crashed_container_and_its_exit_code() {
        let p = pod(json!({ "phase": "Failed", "containerStatuses": [
            { "name": "ok", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
              "state": { "terminated": { "exitCode": 0 } } },
            { "name": "check", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
              "state": { "terminated": { "exitCode": 2, "reason": "Error" } } }
        ]}));
        assert_eq!(
            observe(&p),
            PodProgress::Failed {
                detail: r#"container "check" exited with code 2 (Error)"#.into(),
                log_container: Some("check".into()),
            }
        );
    }

    #[test]
    fn evicted_pod_reports_the_pod_reason() {
        let p = pod(json!({ "phase": "Failed", "reason": "Evicted",
                            "message": "The node was low on resource: memory." }));
        let PodProgress::Failed { detail, .. } = observe(&p) else {
            panic!("not failed");
        };
        assert_eq!(
            detail,
            "pod failed: Evicted: The node was low on resource: memory."
        );
    }

    #[test]
    fn image_pull_backoff_gets_a_grace_and_invalid_image_fails_now() {
        let waiting = |reason: &str| {
            pod(json!({ "phase": "Pending", "containerStatuses": [
                { "name": "check", "image": "nope", "imageID": "", "ready": false,
                  "restartCount": 0, "state": { "waiting": {
                      "reason": reason, "message": "Back-off pulling image \"nope\"" } } }
            ]}))
        };
        let PodProgress::NotStarting {
            reason,
            detail,
            wait,
        } = observe(&waiting("ImagePullBackOff"))
        else {
            panic!("not stuck");
        };
        assert_eq!(
            (reason.as_str(), wait),
            ("ImagePullBackOff", StartWait::Grace)
        );
        assert_eq!(
            detail,
            r#"container "check" cannot start: ImagePullBackOff: Back-off pulling image "nope""#
        );
        assert!(matches!(
            observe(&waiting("InvalidImageName")),
            PodProgress::NotStarting {
                wait: StartWait::FailNow,
                ..
            }
        ));
        assert_eq!(
            observe(&waiting("ContainerCreating")),
            PodProgress::InProgress {
                detail: "Pending: ContainerCreating".into()
            }
        );
    }

    #[test]
    fn unschedulable_pod_waits_until_the_timeout_with_the_scheduler_message() {
        let p = pod(json!({ "phase": "Pending", "conditions": [
            { "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
              "message": "0/3 nodes are available: 3 Insufficient cpu." }
        ]}));
        assert_eq!(
            observe(&p),
            PodProgress::NotStarting {
                reason: "Unschedulable".into(),
                detail: "pod is unschedulable: 0/3 nodes are available: 3 Insufficient cpu.".into(),
                wait: StartWait::UntilTimeout,
            }
        );
    }

    #[test]
    fn pod_without_status_is_pending() {
        let p: Pod = serde_json::from_value(json!({ "metadata": { "name": "p" } })).unwrap();
        assert_eq!(
            observe(&p),
            PodProgress::InProgress {
                detail: "Pending".into()
            }
        );
        assert_eq!(
            observe(&pod(json!({ "phase": "Succeeded" }))),
            PodProgress::Succeeded
        );
    }
}

//! Fixtures for the runner's tests: a check spec, a runner over [`FakePodApi`], scripts
//! that read like sentences, and waiting for a condition on the paused clock.

use std::time::Duration;

use fleetpulse_common::api::check::PodCheck;
use k8s_openapi::api::core::v1::PodStatus;
use serde_json::json;
use tokio::time::Instant;

use super::fake_api::{FakePodApi, Script};
use super::runner::PodCheckRunner;

/// The agent's checks namespace.
pub const NS: &str = "fleetpulse-checks";
/// One second.
pub const S: Duration = Duration::from_secs(1);

/// A pod check running busybox every minute, for at most two.
pub fn spec() -> PodCheck {
    serde_json::from_value(json!({
        "template": { "spec": { "containers": [{ "name": "check", "image": "busybox" }] } },
        "intervalSeconds": 60,
        "runTimeoutSeconds": 120,
    }))
    .unwrap()
}

/// A runner for the check `dns` over `fake`.
pub fn runner(fake: &FakePodApi, spec: &PodCheck) -> PodCheckRunner<FakePodApi> {
    PodCheckRunner::new(fake.clone(), "dns", spec, NS)
}

/// A pod that succeeds after 3 s.
pub fn succeed() -> Script {
    Script::Succeed { after: 3 * S }
}

/// A pod that exits 1 after 5 s, having logged `line 1` to `line {log_lines}`.
pub fn fail(log_lines: usize) -> Script {
    let log = (1..=log_lines).map(|i| format!("line {i}\n")).collect();
    Script::Fail {
        after: 5 * S,
        exit_code: 1,
        log,
    }
}

/// A pod that stays in `status`.
pub fn stuck(status: serde_json::Value) -> Script {
    Script::Stuck(Box::new(
        serde_json::from_value::<PodStatus>(status).unwrap(),
    ))
}

/// Waits (virtually) until `condition` holds, for at most an hour of virtual time.
pub async fn wait_until(fake: &FakePodApi, condition: impl Fn(&FakePodApi) -> bool) {
    let deadline = Instant::now() + 3600 * S;
    while !condition(fake) {
        assert!(Instant::now() < deadline, "condition not reached");
        tokio::time::sleep(S).await;
    }
}

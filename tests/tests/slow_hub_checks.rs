//! A slow hub-side check delays only the hub-side checks: the failure detector runs on its
//! own tick. Sixty clusters whose `fromHub` check spins until its Lua deadline (250 ms)
//! make one round of hub-side checks last about 15 s; a cluster whose agent stops is still
//! marked unreachable within its grace period plus a few ticks.

use std::time::{Duration, Instant};

use fleetpulse_common::api::condition::{REACHABLE, Status};
use fleetpulse_tests::scenario::Scenario;
use fleetpulse_tests::wait;

const CLUSTERS: usize = 60;
const GRACE_SECS: u32 = 3;

/// A HealthPolicy for every cluster of `fleet` with a hub-side check that never finishes.
const SPINNING: &str = r#"apiVersion: fleetpulse.io/v1alpha1
kind: HealthPolicy
metadata: {name: spinning, namespace: fleet}
spec:
  clusterSelector: {}
  livenessChecks:
    - name: spinning
      resourceSelectors:
        - {group: "", version: v1, kind: ConfigMap, fromHub: true}
      condition: |
        function evaluate()
          while true do end
        end
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_hub_side_check_does_not_delay_detecting_a_silent_cluster() -> anyhow::Result<()> {
    let mut s = Scenario::start(CLUSTERS, 1, GRACE_SECS).await?;
    s.write_manifest("spinning.yaml", SPINNING)?;
    s.start_agent(0)?;
    wait::until("edge-1 Reachable", Duration::from_secs(30), || {
        s.condition(0, REACHABLE) == Status::True
    })
    .await?;
    s.stop_agent(0).await?;
    let stopped = Instant::now();
    // Grace, plus ticks and a loaded machine's slack; far below one round of hub checks.
    let deadline = Duration::from_secs(u64::from(GRACE_SECS) + 6);
    wait::until("edge-1 Unreachable", deadline, || {
        s.condition(0, REACHABLE) == Status::False
    })
    .await?;
    println!(
        "silent cluster unreachable {:.1}s after its agent stopped (grace {GRACE_SECS}s)",
        stopped.elapsed().as_secs_f64()
    );
    s.shutdown().await
}

//! The hub's background loops, until shutdown: the failure detector tick, the manifest
//! rescan, the position flush and (Kubernetes mode) the coarse status refresh in one; the
//! hub-side checks in another of their own ([`hub_checks`]), so a slow check never delays
//! the detector.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use super::HubOptions;
use super::manifests::reload;
use crate::embedded::manifests::ManifestDir;
use crate::fleet::Fleet;

/// Slices of the coarse status refresh (one every 5 s at the default 5 minutes).
const REFRESH_PARTS: u64 = 60;

pub(super) async fn run(
    fleet: Arc<Fleet>,
    mut manifests: Option<ManifestDir>,
    opts: HubOptions,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(opts.tick);
    let mut rescan = tokio::time::interval(opts.reload_interval);
    let mut flush = tokio::time::interval(opts.position_flush_interval);
    // The refresh runs in REFRESH_PARTS slices spread over its interval.
    let refresh_statuses = opts.kube.is_some() && !opts.status_refresh.is_zero();
    // It starts one whole interval after start: status was just loaded or written.
    let slice = if refresh_statuses {
        (opts.status_refresh / REFRESH_PARTS as u32).max(Duration::from_millis(10))
    } else {
        Duration::from_secs(3600)
    };
    let mut refresh =
        tokio::time::interval_at(tokio::time::Instant::now() + opts.status_refresh, slice);
    let mut refresh_part = 0;
    for t in [&mut tick, &mut rescan, &mut flush, &mut refresh] {
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    }
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            // The tick walks every cluster: off the runtime's worker threads, so ingest
            // is never stalled.
            _ = tick.tick() => {
                let fleet = fleet.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    fleet.tick(Instant::now(), Timestamp::now())
                })
                .await;
            }
            _ = rescan.tick(), if manifests.is_some() => {
                if let Some(m) = manifests.as_mut() {
                    reload(&fleet, m, false);
                }
            }
            _ = flush.tick() => fleet.flush_positions(),
            _ = refresh.tick(), if refresh_statuses => {
                fleet.refresh_statuses(refresh_part, REFRESH_PARTS);
                refresh_part = (refresh_part + 1) % REFRESH_PARTS;
            }
        }
    }
}

/// Runs the hub-side checks every `period`, each round after the previous one ended, off
/// the runtime's worker threads and off the detector's tick.
pub(super) async fn hub_checks(fleet: Arc<Fleet>, period: Duration, stop: CancellationToken) {
    let mut round = tokio::time::interval(period);
    round.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = round.tick() => {
                let fleet = fleet.clone();
                let run = move || fleet.run_hub_checks(Instant::now(), Timestamp::now());
                let _ = tokio::task::spawn_blocking(run).await;
            }
        }
    }
}

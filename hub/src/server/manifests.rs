//! Embedded mode's manifest directory: loaded in full before the hub serves, and rescanned
//! while it runs (a refused file keeps the previous version in effect).

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;

use super::standby;
use crate::embedded::manifests::ManifestDir;
use crate::fleet::Fleet;

/// Loads the manifests at start, and does not become ready while a file fails to load: the
/// previous process served its objects, and starting without them would refuse their
/// agents as unknown and reselect their sets. `/readyz` and every agent request say which
/// file, document and problem; the directory is rescanned until it loads.
pub(super) async fn load_every(
    fleet: &Fleet,
    manifests: &mut ManifestDir,
    router: &watch::Sender<super::listener::Routed>,
    rescan: Duration,
) {
    reload(fleet, manifests, true);
    let mut said = String::new();
    loop {
        let unloaded: Vec<String> = manifests.unloaded().iter().map(|e| e.to_string()).collect();
        if unloaded.is_empty() {
            return;
        }
        let why = format!(
            "not serving until every manifest loads (the objects it defines would be judged \
             missing): {}; fix the file, it is read again every {}s",
            unloaded.join("; "),
            rescan.as_secs_f64()
        );
        if why != said {
            tracing::error!(files = unloaded.len(), problem = %why, "manifests failed to load at start");
            router.send_modify(|r| *r = standby::router(why.clone(), false).into());
            said = why;
        }
        tokio::time::sleep(rescan).await;
        reload(fleet, manifests, false);
    }
}

pub(super) fn reload(fleet: &Fleet, manifests: &mut ManifestDir, first: bool) {
    let scan = manifests.scan();
    for e in &scan.errors {
        tracing::error!(error = %e, "manifest refused; the previous version stays in effect");
    }
    if scan.changed || first {
        let count = scan.objects.member_clusters.len();
        for problem in fleet.reload(scan.objects, Instant::now(), Timestamp::now()) {
            tracing::error!(problem, "conflicting objects");
        }
        tracing::info!(member_clusters = count, "objects loaded");
    }
}

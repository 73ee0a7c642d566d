//! The services a hub runs beside ingest, each started from the options: enrolment (its
//! state in Secrets or in the embedded store) and the mirror writer with its feed.

use std::sync::Arc;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::HubOptions;
use crate::fleet::Fleet;
use crate::mirrors::Mirrors;

/// Starts the mirror writer and its feed from the fleet. Mirrors are written to
/// `--mirror-kubeconfig`'s cluster, else (Kubernetes mode) to the hub's own; an embedded
/// hub without one shows in the read API what it would write.
pub(super) fn spawn_mirrors(
    fleet: &Arc<Fleet>,
    opts: &HubOptions,
    shutdown: &CancellationToken,
    tasks: &mut JoinSet<()>,
) {
    let client = opts.mirror_client.clone().or_else(|| opts.kube.clone());
    let (handle, changes) = Mirrors::spawn(client, opts.mirrors.resync(), shutdown.clone());
    fleet.use_mirrors(Arc::new(handle.clone()));
    tasks.spawn(crate::mirrors::feed::run(
        fleet.clone(),
        opts.mirrors.clone(),
        handle,
        changes,
        shutdown.clone(),
    ));
}

/// Serves enrolment with the state where `opts` says (see [`crate::enrolment::serve`]).
pub(super) async fn serve_enrolment(
    opts: &HubOptions,
    fleet: &Arc<Fleet>,
    app: axum::Router,
    stop: &CancellationToken,
) -> Result<axum::Router, crate::enrolment::EnrolStoreError> {
    use crate::enrolment::{EnrolPlace, EnrolSettings};
    let mut settings =
        EnrolSettings::new(opts.decisions.audience.clone(), opts.decisions.freshness);
    settings.overlap = opts.key_overlap;
    let place = match &opts.kube {
        Some(client) => EnrolPlace::Secrets {
            client,
            namespace: &opts.enrolment_namespace,
        },
        None => EnrolPlace::Data(&opts.data),
    };
    crate::enrolment::serve(place, settings, fleet, app, stop).await
}

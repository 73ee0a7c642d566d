//! The console: a read-only web view of the fleet on the admin listener, for the operator
//! a pager just woke. The page, its script and its style are embedded in the binary
//! ([`assets`]) and are the same for everyone: they carry no fleet data, so they load
//! without a token (the login page must show before one is entered). Everything the page
//! shows comes through the admin API behind the same authentication as the read API: the
//! live stream ([`events`]) and one cluster in full (`GET
//! /v1/console/clusters/{namespace}/{name}`). The page sends the token the operator
//! entered as a bearer header, never in a URL, and keeps it in the tab's session storage.
//! Nothing here writes.

mod assets;
pub mod events;

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use fleetpulse_common::protocol::errors::RejectCode;

use crate::fleet::Fleet;
use crate::fleet::overview::ClusterDetail;
use crate::ids::ClusterId;
use crate::refusal::Refusal;

pub use assets::{is_asset, router as assets_router};

/// What the console's handlers share.
#[derive(Clone)]
pub struct ConsoleState {
    /// The fleet.
    pub fleet: Arc<Fleet>,
    /// Cancelled when the hub stops: live streams end, so shutdown does not wait on them.
    pub stop: CancellationToken,
}

/// The console's routes: the embedded page and its data.
pub fn router(fleet: Arc<Fleet>, stop: CancellationToken) -> Router {
    Router::new()
        .route("/v1/console/events", get(events::stream))
        .route("/v1/console/clusters/{namespace}/{name}", get(cluster))
        .with_state(ConsoleState { fleet, stop })
        .merge(assets_router())
}

/// `GET /v1/console/clusters/{namespace}/{name}`: one cluster in full.
async fn cluster(
    State(s): State<ConsoleState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<ClusterDetail>, Refusal> {
    let id = ClusterId::new(namespace, name);
    s.fleet.cluster_detail(&id).map(Json).ok_or_else(|| {
        Refusal::new(
            RejectCode::UnknownCluster,
            format!("no MemberCluster {id} on this hub: check the namespace and name"),
        )
    })
}

#[cfg(test)]
mod tests;

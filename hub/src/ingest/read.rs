//! The read API: objects shaped exactly like the CRDs, with their status, as Kubernetes
//! lists (`{apiVersion, kind: XList, items}`).

use axum::Json;
use axum::extract::{Path, Query, State};
use serde::{Deserialize, Serialize};

use fleetpulse_common::api::API_VERSION;
use fleetpulse_common::protocol::report::ClusterId;

use crate::fleet::transitions::Transition;

use super::AppState;

/// Optional filter: `?namespace=`.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    namespace: Option<String>,
}

/// A Kubernetes-style list.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct List<T> {
    /// `fleetpulse.io/v1alpha1`.
    pub api_version: String,
    /// e.g. `MemberClusterList`.
    pub kind: String,
    /// The objects.
    pub items: Vec<T>,
}

fn list<T>(kind: &str, items: Vec<T>) -> Json<List<T>> {
    Json(List {
        api_version: API_VERSION.into(),
        kind: format!("{kind}List"),
        items,
    })
}

fn in_namespace(q: &ListQuery, ns: Option<&str>) -> bool {
    q.namespace.as_deref().is_none_or(|want| ns == Some(want))
}

/// `GET /v1/memberclusters`.
pub async fn member_clusters(
    State(s): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Json<List<fleetpulse_common::api::MemberCluster>> {
    let mut items = s.fleet.member_clusters();
    items.retain(|m| in_namespace(&q, m.metadata.namespace.as_deref()));
    list("MemberCluster", items)
}

/// `GET /v1/memberclusters/{namespace}/{name}/transitions`: the cluster's recent
/// condition transitions, oldest first (kept in this hub process's memory; empty for an
/// unknown cluster).
pub async fn transitions(
    State(s): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Json<List<Transition>> {
    let id = ClusterId::new(namespace, name);
    list("Transition", s.fleet.recent_transitions(&id))
}

/// `GET /v1/clustersets`.
pub async fn cluster_sets(
    State(s): State<AppState>,
) -> Json<List<fleetpulse_common::api::ClusterSet>> {
    list("ClusterSet", s.fleet.cluster_sets())
}

/// `GET /v1/sets`.
pub async fn sets(
    State(s): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Json<List<fleetpulse_common::api::Set>> {
    let mut items = s.fleet.sets();
    items.retain(|m| in_namespace(&q, m.metadata.namespace.as_deref()));
    list("Set", items)
}

/// `GET /v1/healthpolicies`.
pub async fn health_policies(
    State(s): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Json<List<fleetpulse_common::api::HealthPolicy>> {
    let mut items = s.fleet.health_policies();
    items.retain(|m| in_namespace(&q, m.metadata.namespace.as_deref()));
    list("HealthPolicy", items)
}

/// `GET /v1/hub`: the hub's own state (the partition brake).
pub async fn hub(State(s): State<AppState>) -> Json<crate::fleet::read::HubStatus> {
    Json(s.fleet.hub_status())
}

//! The read API: objects shaped exactly like the CRDs, with their status, as Kubernetes
//! lists (`{apiVersion, kind: XList, items}`).

use axum::Json;
use axum::extract::{Path, Query, State};
use kube::Resource;
use serde::{Deserialize, Serialize};

use fleetpulse_common::api::{API_VERSION, HealthPolicy, MemberCluster, Set};
use fleetpulse_common::protocol::report::ClusterId;

use crate::fleet::Fleet;
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

/// A namespaced object the read API lists: its kind and how the fleet shows it.
pub trait Listed: Resource + Serialize + Sized {
    /// The kind, e.g. `Set` (its list is a `SetList`).
    const KIND: &'static str;
    /// Every object, with its live status.
    fn all(fleet: &Fleet) -> Vec<Self>;
}

impl Listed for MemberCluster {
    const KIND: &'static str = "MemberCluster";
    fn all(fleet: &Fleet) -> Vec<Self> {
        fleet.member_clusters()
    }
}

impl Listed for Set {
    const KIND: &'static str = "Set";
    fn all(fleet: &Fleet) -> Vec<Self> {
        fleet.sets()
    }
}

impl Listed for HealthPolicy {
    const KIND: &'static str = "HealthPolicy";
    fn all(fleet: &Fleet) -> Vec<Self> {
        fleet.health_policies()
    }
}

/// `GET /v1/memberclusters`, `/v1/sets` and `/v1/healthpolicies`: every object of the
/// kind, only those of one namespace with `?namespace=`.
pub async fn objects<T: Listed>(
    State(s): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Json<List<T>> {
    let mut items = T::all(&s.fleet);
    if let Some(want) = q.namespace.as_deref() {
        items.retain(|m| m.meta().namespace.as_deref() == Some(want));
    }
    list(T::KIND, items)
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

/// `GET /v1/hub`: the hub's own state (the partition brake).
pub async fn hub(State(s): State<AppState>) -> Json<crate::fleet::read::HubStatus> {
    Json(s.fleet.hub_status())
}

//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis` and `/apis/{group}/{version}`,
//! built from the live resource registry so runtime-registered CRDs appear immediately.

use crate::{error::ApiError, server::Shared};
use axum::{
    Json,
    extract::{Path, State},
};
use serde_json::{Value, json};
use std::sync::Arc;

/// `GET /version`.
pub async fn version() -> Json<Value> {
    Json(json!({
        "major": "1",
        "minor": "34",
        "gitVersion": "v1.34.0-kubesim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64",
    }))
}

/// `GET /api`: the core group's versions.
pub async fn core_versions() -> Json<Value> {
    Json(json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}],
    }))
}

fn resource_list(shared: &Shared, group: &str, version: &str) -> Option<Value> {
    let store = shared.store.lock();
    let resources: Vec<Value> = store
        .registry
        .all()
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .flat_map(|d| d.discovery_entries())
        .collect();
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }))
}

/// `GET /api/v1`.
pub async fn core_resources(State(shared): State<Arc<Shared>>) -> Result<Json<Value>, ApiError> {
    resource_list(&shared, "", "v1")
        .map(Json)
        .ok_or_else(|| ApiError::no_route("/api/v1"))
}

/// `GET /apis`: every non-core group with its versions (the first is preferred).
pub async fn groups(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let groups = shared.store.lock().registry.groups();
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(name, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
                .collect();
            json!({"name": name, "versions": vs, "preferredVersion": vs[0]})
        })
        .collect();
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

/// `GET /apis/{group}/{version}`.
pub async fn group_resources(
    State(shared): State<Arc<Shared>>,
    Path((group, version)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    resource_list(&shared, &group, &version)
        .map(Json)
        .ok_or_else(|| ApiError::no_route(&format!("/apis/{group}/{version}")))
}

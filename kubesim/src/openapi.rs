//! OpenAPI v3, as `kubectl explain` reads it: `/openapi/v3` lists one document per
//! group/version, and each document (`/openapi/v3/apis/{group}/{version}`, `/openapi/v3/api/v1`)
//! has the resources' paths tagged with their group/version/kind and, for custom
//! resources, the CRD version's schema as a component. As the API server does, the schema
//! gains `apiVersion`, `kind` and `metadata` with their standard descriptions.
//! Built-in types are listed with their paths but without schemas.

use crate::{error::ApiError, resources::ResourceDef, server::Shared};
use axum::{
    Json,
    extract::{Path, State},
};
use serde_json::{Map, Value, json};
use std::{
    hash::{DefaultHasher, Hash, Hasher},
    sync::Arc,
};

const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation \
    of an object. Servers should convert recognized schemas to the latest internal value, and \
    may reject unrecognized values.";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object \
    represents. Servers may infer this from the endpoint the client submits requests to. \
    Cannot be updated. In CamelCase.";
const METADATA_DOC: &str = "Standard object's metadata: name, namespace, labels, annotations, \
    resourceVersion and the other fields every Kubernetes object has.";

/// `apis/{group}/{version}` or `api/v1`: the key of a document in `/openapi/v3`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The component name of a type: the reversed group, version and kind
/// (`io.fleetpulse.v1alpha1.MemberCluster`), as the API server names CRD schemas.
fn component_name(def: &ResourceDef) -> String {
    let group = if def.group.is_empty() {
        "io.k8s.api.core".to_owned()
    } else {
        def.group.split('.').rev().collect::<Vec<_>>().join(".")
    };
    format!("{group}.{}.{}", def.version, def.kind)
}

fn gvk(def: &ResourceDef) -> Value {
    json!({"group": def.group, "version": def.version, "kind": def.kind})
}

/// The schema with the fields every object has, described.
fn object_schema(def: &ResourceDef, schema: &Value) -> Value {
    let mut schema = schema.clone();
    if !schema["properties"].is_object() {
        schema["properties"] = json!({});
    }
    let props = &mut schema["properties"];
    for (field, type_, doc) in [
        ("apiVersion", "string", API_VERSION_DOC),
        ("kind", "string", KIND_DOC),
        ("metadata", "object", METADATA_DOC),
    ] {
        if !props[field].is_object() {
            props[field] = json!({"type": type_});
        }
        if props[field]["description"].is_null() {
            props[field]["description"] = doc.into();
        }
    }
    schema["x-kubernetes-group-version-kind"] = json!([gvk(def)]);
    schema
}

/// The document of one group/version, or `None` when nothing is served there.
fn document(defs: &[&ResourceDef]) -> Option<Value> {
    let first = defs.first()?;
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for def in defs {
        let base = format!("/{}", gv_path(&def.group, &def.version));
        let collection = if def.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", def.plural)
        } else {
            format!("{base}/{}", def.plural)
        };
        let name = component_name(def);
        let response = if def.schema.is_some() {
            json!({"200": {"description": "OK", "content": {"application/json": {
                "schema": {"$ref": format!("#/components/schemas/{name}")}}}}})
        } else {
            json!({"200": {"description": "OK"}})
        };
        let operation = |id: &str, action: &str| {
            json!({
                "operationId": format!("{id}{}", def.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk(def),
                "responses": response,
            })
        };
        paths.insert(
            collection.clone(),
            json!({"get": operation("list", "list")}),
        );
        // The PATCH operation's `fieldValidation` parameter tells kubectl to leave
        // validation to the server (kubesim validates nothing; see its README).
        let mut patch = operation("patch", "patch");
        patch["parameters"] = json!([{"name": "fieldValidation", "in": "query",
                                      "schema": {"type": "string"}}]);
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({"get": operation("read", "get"), "patch": patch}),
        );
        if let Some(schema) = &def.schema {
            schemas.insert(name, object_schema(def, schema));
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kubesim)", "version": first.api_version()},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

fn defs_of<'a>(defs: &'a [ResourceDef], group: &str, version: &str) -> Vec<&'a ResourceDef> {
    defs.iter()
        .filter(|d| d.group == group && d.version == version)
        .collect()
}

fn hash(doc: &Value) -> String {
    let mut h = DefaultHasher::new();
    doc.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

/// `GET /openapi/v3`: every served group/version, with a URL whose `hash` changes when its
/// document does (clients cache documents by it).
pub async fn index(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let store = shared.store.lock();
    let defs = store.registry.all();
    let mut gvs: Vec<(String, String)> = Vec::new();
    for d in defs {
        let gv = (d.group.clone(), d.version.clone());
        if !gvs.contains(&gv) {
            gvs.push(gv);
        }
    }
    let mut paths = Map::new();
    for (group, version) in gvs {
        if let Some(doc) = document(&defs_of(defs, &group, &version)) {
            let key = gv_path(&group, &version);
            let url = format!("/openapi/v3/{key}?hash={}", hash(&doc));
            paths.insert(key, json!({"serverRelativeURL": url}));
        }
    }
    Json(json!({"paths": paths}))
}

fn served(shared: &Shared, group: &str, version: &str) -> Result<Json<Value>, ApiError> {
    let store = shared.store.lock();
    document(&defs_of(store.registry.all(), group, version))
        .map(Json)
        .ok_or_else(|| ApiError::no_route(&format!("/openapi/v3/{}", gv_path(group, version))))
}

/// `GET /openapi/v3/api/{version}`.
pub async fn core(
    State(shared): State<Arc<Shared>>,
    Path(version): Path<String>,
) -> Result<Json<Value>, ApiError> {
    served(&shared, "", &version)
}

/// `GET /openapi/v3/apis/{group}/{version}`.
pub async fn group(
    State(shared): State<Arc<Shared>>,
    Path((group, version)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    served(&shared, &group, &version)
}

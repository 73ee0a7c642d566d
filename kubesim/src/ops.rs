//! Object life-cycle rules shared by the HTTP handlers and the simulated kubelet: what create,
//! update, status update and delete do to metadata, generation, finalizers and events.

use crate::{
    error::ApiError,
    resources::ResourceDef,
    store::{EventType, Store, ns_name},
};
use k8s_openapi::jiff::{Timestamp, Unit};
use serde_json::{Value, json};

/// The current time as RFC 3339 with second precision, as Kubernetes stamps objects.
pub fn timestamp() -> String {
    Timestamp::now()
        .round(Unit::Second)
        .unwrap_or_else(|_| Timestamp::now())
        .to_string()
}

fn is_core(def: &ResourceDef, plural: &str) -> bool {
    def.group.is_empty() && def.plural == plural
}

fn is_crd(def: &ResourceDef) -> bool {
    def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions"
}

/// Type-specific defaults kubesim applies on create (a tiny stand-in for defaulting).
fn default_status(def: &ResourceDef, obj: &mut Value) {
    if is_core(def, "namespaces") {
        obj["status"] = json!({"phase": "Active"});
    } else if is_core(def, "pods") && obj["status"]["phase"].is_null() {
        obj["status"] = json!({"phase": "Pending"});
    } else if is_crd(def) {
        let names = obj["spec"]["names"].clone();
        let stored: Vec<Value> = obj["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["storage"].as_bool().unwrap_or(false))
            .map(|v| v["name"].clone())
            .collect();
        let now = timestamp();
        obj["status"] = json!({
            "acceptedNames": names,
            "storedVersions": stored,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
        });
    }
}

/// Creates an object in namespace `ns` (ignored for cluster-scoped types).
pub fn create(
    store: &mut Store,
    def: &ResourceDef,
    ns: &str,
    mut obj: Value,
) -> Result<Value, ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    }
    if !(obj["metadata"].is_object() || obj["metadata"].is_null()) {
        return Err(ApiError::bad_request("metadata must be a JSON object"));
    }
    let meta = &mut obj["metadata"];
    if !meta.is_object() {
        *meta = json!({});
    }
    if meta["name"].as_str().is_none_or(str::is_empty) {
        let prefix = meta["generateName"].as_str().unwrap_or_default().to_owned();
        if prefix.is_empty() {
            return Err(ApiError::invalid(format!(
                "{} is invalid: metadata.name: Required value: name or generateName is required",
                def.kind
            )));
        }
        let suffix: String = uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .chars()
            .take(5)
            .collect();
        meta["name"] = format!("{prefix}{suffix}").into();
    }
    if def.namespaced {
        if let Some(body_ns) = meta["namespace"]
            .as_str()
            .filter(|n| !n.is_empty() && *n != ns)
        {
            return Err(ApiError::bad_request(format!(
                "the namespace of the provided object ({body_ns}) does not match the namespace sent on the request ({ns})"
            )));
        }
        meta["namespace"] = ns.into();
        let ns_def = store.registry.find("", "v1", "namespaces").cloned();
        if ns_def.is_some_and(|d| store.get(&d, "", ns).is_none()) {
            return Err(ApiError::not_found("namespaces", ns));
        }
    } else if let Some(m) = meta.as_object_mut() {
        m.remove("namespace");
    }
    let (ns, name) = ns_name(&obj);
    if store.get(def, &ns, &name).is_some() {
        return Err(ApiError::already_exists(&def.plural, &name));
    }
    let meta = &mut obj["metadata"];
    meta["uid"] = uuid::Uuid::new_v4().to_string().into();
    meta["creationTimestamp"] = timestamp().into();
    meta["generation"] = 1.into();
    if let Some(m) = meta.as_object_mut() {
        m.remove("deletionTimestamp");
        m.remove("resourceVersion");
    }
    if def.status_subresource
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    default_status(def, &mut obj);
    if is_crd(def) {
        store.registry.register_crd(&obj);
    }
    Ok(store.put(def, obj, EventType::Added))
}

/// Everything except `metadata` and `status`: what bumps `generation` when it changes.
fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(o) = v.as_object_mut() {
        for k in ["metadata", "status", "apiVersion", "kind"] {
            o.remove(k);
        }
    }
    v
}

/// Replaces an existing object with `new`, applying optimistic concurrency on
/// `metadata.resourceVersion`. With `status_only` only `.status` is taken from `new`; otherwise
/// `.status` is kept from the stored object when the type has a status subresource.
pub fn update(
    store: &mut Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    new: Value,
    status_only: bool,
) -> Result<Value, ApiError> {
    let ns = if def.namespaced { ns } else { "" };
    let old = store
        .get(def, ns, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&def.plural, name))?;
    if !new.is_object() || !(new["metadata"].is_object() || new["metadata"].is_null()) {
        return Err(ApiError::bad_request(
            "request body must be a JSON object with an object `metadata`",
        ));
    }
    let sent_rv = new["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    if !sent_rv.is_empty() && Some(sent_rv) != old["metadata"]["resourceVersion"].as_str() {
        return Err(ApiError::conflict(&def.plural, name));
    }
    if new["metadata"]["name"].as_str().is_some_and(|n| n != name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            new["metadata"]["name"].as_str().unwrap_or_default()
        )));
    }
    let mut next = if status_only {
        let mut n = old.clone();
        n["status"] = new["status"].clone();
        n
    } else {
        let mut n = new;
        for k in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "generation",
            "name",
            "namespace",
        ] {
            n["metadata"][k] = old["metadata"][k].clone();
        }
        if let Some(m) = n["metadata"].as_object_mut() {
            m.retain(|_, v| !v.is_null());
        }
        if def.status_subresource {
            n["status"] = old["status"].clone();
        }
        if spec_part(&n) != spec_part(&old) {
            let gen_ = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            n["metadata"]["generation"] = gen_.into();
        }
        n
    };
    if let Some(o) = next.as_object_mut() {
        o.retain(|_, v| !v.is_null());
    }
    next["apiVersion"] = old["apiVersion"].clone();
    next["kind"] = old["kind"].clone();
    next["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
    if next == old {
        return Ok(old);
    }
    let finalizers_empty = next["metadata"]["finalizers"]
        .as_array()
        .is_none_or(Vec::is_empty);
    if !next["metadata"]["deletionTimestamp"].is_null() && finalizers_empty {
        return Ok(store.remove(def, ns, name).unwrap_or(next));
    }
    if is_crd(def) {
        store.registry.register_crd(&next);
    }
    Ok(store.put(def, next, EventType::Modified))
}

/// Deletes an object; with finalizers it is only marked (`deletionTimestamp`) and kept until
/// they are removed. Deleting a namespace deletes its contents; deleting a CRD its objects.
pub fn delete(
    store: &mut Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let ns = if def.namespaced { ns } else { "" };
    let mut obj = store
        .get(def, ns, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&def.plural, name))?;
    if obj["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
    {
        if obj["metadata"]["deletionTimestamp"].is_null() {
            obj["metadata"]["deletionTimestamp"] = timestamp().into();
            obj["metadata"]["deletionGracePeriodSeconds"] = 0.into();
            return Ok(store.put(def, obj, EventType::Modified));
        }
        return Ok(obj);
    }
    if is_core(def, "namespaces") {
        let namespaced: Vec<ResourceDef> = store
            .registry
            .all()
            .iter()
            .filter(|d| d.namespaced)
            .cloned()
            .collect();
        for d in namespaced {
            for o in store.list(&d, Some(name)) {
                let (_, n) = ns_name(&o);
                store.remove(&d, name, &n);
            }
        }
    }
    if is_crd(def) {
        store.registry.unregister_crd(&obj);
        let group = obj["spec"]["group"].as_str().unwrap_or_default();
        let plural = obj["spec"]["names"]["plural"].as_str().unwrap_or_default();
        store.drop_resource(&format!("{group}/{plural}"));
    }
    store
        .remove(def, ns, name)
        .ok_or_else(|| ApiError::not_found(&def.plural, name))
}

//! Handlers for the non-watch verbs: get, list (selectors, paging), create, replace, patch,
//! delete, deletecollection, and the `pods/log` subresource. Reads answer with a `Table`
//! when the client asks for one; objects are converted between the API's shape and the
//! stored one (only `events.k8s.io/v1` Events differ).

use crate::{
    error::ApiError,
    events::{from_view, to_view},
    managed_fields::{self, Writer},
    ops,
    patch::PatchKind,
    selector::{FieldSelector, LabelSelector},
    server::{Shared, Target},
    store::ns_name,
    table,
};
use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use std::collections::HashMap;

type Reply = Result<Response, ApiError>;

fn ok(v: Value) -> Reply {
    Ok(Json(v).into_response())
}

fn ns(t: &Target) -> &str {
    t.namespace.as_deref().unwrap_or_default()
}

fn name(t: &Target) -> &str {
    t.name.as_deref().unwrap_or_default()
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("request body is not valid JSON: {e}")))
}

/// Label and field selectors from the query string.
pub fn selectors(
    params: &HashMap<String, String>,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(params.get("labelSelector").map_or("", String::as_str))?;
    let fields = FieldSelector::parse(params.get("fieldSelector").map_or("", String::as_str))?;
    Ok((labels, fields))
}

/// `GET` a collection: selectors, `limit` / `continue` paging, list `resourceVersion`; a
/// `Table` when `as_table`.
pub fn list(
    shared: &Shared,
    t: &Target,
    params: &HashMap<String, String>,
    as_table: bool,
) -> Reply {
    let (labels, fields) = selectors(params)?;
    let limit: usize = params
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let after = params
        .get("continue")
        .filter(|c| !c.is_empty())
        .map(|c| {
            c.split_once('/')
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .ok_or_else(|| ApiError::bad_request(format!("invalid continue token {c:?}")))
        })
        .transpose()?;
    let store = shared.store.lock();
    let matching: Vec<Value> = store
        .list(&t.def, t.namespace.as_deref())
        .into_iter()
        .filter(|o| after.as_ref().is_none_or(|a| ns_name(o) > *a))
        .map(|o| to_view(&t.def, o))
        .filter(|o| labels.matches(o) && fields.matches(o))
        .collect();
    let remaining = matching.len().saturating_sub(limit);
    let items: Vec<Value> = matching.into_iter().take(limit).collect();
    let mut metadata = json!({"resourceVersion": store.current_rv().to_string()});
    if remaining > 0
        && let Some(last) = items.last()
    {
        let (n, m) = ns_name(last);
        metadata["continue"] = format!("{n}/{m}").into();
        metadata["remainingItemCount"] = remaining.into();
    }
    if as_table {
        let now = k8s_openapi::jiff::Timestamp::now();
        return ok(table::table(&t.def, &items, metadata, params, now));
    }
    ok(json!({
        "kind": format!("{}List", t.def.kind),
        "apiVersion": t.def.api_version(),
        "metadata": metadata,
        "items": items,
    }))
}

/// `GET` one object (or its `status` subresource, which returns the whole object); a
/// one-row `Table` when `as_table`.
pub fn get(shared: &Shared, t: &Target, params: &HashMap<String, String>, as_table: bool) -> Reply {
    let store = shared.store.lock();
    let obj = store
        .get(&t.def, ns(t), name(t))
        .cloned()
        .map(|o| to_view(&t.def, o))
        .ok_or_else(|| ApiError::not_found(&t.def.plural, name(t)))?;
    if as_table {
        let meta = json!({"resourceVersion": obj["metadata"]["resourceVersion"]});
        let now = k8s_openapi::jiff::Timestamp::now();
        return ok(table::table(&t.def, &[obj], meta, params, now));
    }
    ok(obj)
}

/// `POST` a new object.
pub fn create(shared: &Shared, t: &Target, body: &[u8], writer: &Writer) -> Reply {
    let mut obj = from_view(&t.def, parse_body(body)?);
    managed_fields::record_update(&Value::Null, &mut obj, writer);
    let created = ops::create(&mut shared.store.lock(), &t.def.stored(), ns(t), obj)?;
    Ok((StatusCode::CREATED, Json(to_view(&t.def, created))).into_response())
}

/// `PUT` an object or its `status` subresource.
pub fn replace(shared: &Shared, t: &Target, body: &[u8], writer: &Writer) -> Reply {
    let mut obj = from_view(&t.def, parse_body(body)?);
    let status_only = t.sub.as_deref() == Some("status");
    let mut store = shared.store.lock();
    let ns_key = if t.def.namespaced { ns(t) } else { "" };
    if !status_only && let Some(old) = store.get(&t.def, ns_key, name(t)) {
        managed_fields::record_update(old, &mut obj, writer);
    }
    let updated = ops::update(
        &mut store,
        &t.def.stored(),
        ns(t),
        name(t),
        obj,
        status_only,
    )?;
    ok(to_view(&t.def, updated))
}

/// `PATCH` an object or its `status` subresource; apply patches create absent objects
/// (unless they carry a `resourceVersion`) and own exactly the labels they send.
pub fn patch(
    shared: &Shared,
    t: &Target,
    content_type: &str,
    body: &[u8],
    writer: &Writer,
) -> Reply {
    let kind = PatchKind::from_content_type(content_type)?;
    let patch = kind.parse_body(body)?;
    let status_only = t.sub.as_deref() == Some("status");
    let mut store = shared.store.lock();
    let ns_key = if t.def.namespaced { ns(t) } else { "" };
    let stored = t.def.stored();
    let current = store.get(&t.def, ns_key, name(t)).cloned();
    let Some(current) = current.map(|o| to_view(&t.def, o)) else {
        if kind == PatchKind::Apply && !status_only {
            let mut obj = patch;
            if !obj.is_object() || !(obj["metadata"].is_object() || obj["metadata"].is_null()) {
                return Err(ApiError::bad_request(
                    "apply body must be an object with metadata",
                ));
            }
            if !obj["metadata"]["resourceVersion"].is_null() {
                return Err(ApiError::not_found(&t.def.plural, name(t)));
            }
            obj["metadata"]["name"] = name(t).into();
            let applied = labels_of(&obj);
            let obj = managed_fields::apply_labels(&obj, &applied, writer, &t.def.plural, name(t))?;
            let created = ops::create(&mut store, &stored, ns(t), from_view(&t.def, obj))?;
            return Ok((StatusCode::CREATED, Json(to_view(&t.def, created))).into_response());
        }
        return Err(ApiError::not_found(&t.def.plural, name(t)));
    };
    let mut patched = if kind == PatchKind::Apply && !status_only {
        let applied = labels_of(&patch);
        let mut rest = patch.clone();
        if let Some(m) = rest["metadata"].as_object_mut() {
            m.remove("labels");
            m.remove("managedFields");
        }
        let owned =
            managed_fields::apply_labels(&current, &applied, writer, &t.def.plural, name(t))?;
        kind.apply(&owned, &rest)?
    } else {
        let mut patched = kind.apply(&current, &patch)?;
        if !status_only {
            managed_fields::record_update(&current, &mut patched, writer);
        }
        patched
    };
    if kind == PatchKind::Apply && patch["metadata"]["resourceVersion"].is_null() {
        patched["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    }
    let updated = ops::update(
        &mut store,
        &stored,
        ns(t),
        name(t),
        from_view(&t.def, patched),
        status_only,
    )?;
    ok(to_view(&t.def, updated))
}

/// A competing write made just before a request (see
/// [`crate::KubeSim::interleave_before_next`]): `patch` merged into the request's target,
/// as field manager `interleaved`. A missing target is left alone.
pub fn interleave(store: &mut crate::store::Store, t: &Target, patch: &Value) {
    let ns_key = if t.def.namespaced { ns(t) } else { "" };
    let Some(current) = store.get(&t.def, ns_key, name(t)).cloned() else {
        return;
    };
    let Ok(mut next) = PatchKind::Merge.apply(&current, patch) else {
        return;
    };
    let writer = Writer {
        manager: "interleaved".to_owned(),
        force: false,
    };
    managed_fields::record_update(&current, &mut next, &writer);
    let _ = ops::update(store, &t.def.stored(), ns(t), name(t), next, false);
}

/// The labels an apply body sends.
fn labels_of(body: &Value) -> serde_json::Map<String, Value> {
    body["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// `DELETE` one object.
pub fn delete(shared: &Shared, t: &Target) -> Reply {
    let deleted = ops::delete(&mut shared.store.lock(), &t.def.stored(), ns(t), name(t))?;
    ok(to_view(&t.def, deleted))
}

/// `DELETE` a collection (selectors honoured); answers with the list of deleted objects.
pub fn delete_collection(shared: &Shared, t: &Target, params: &HashMap<String, String>) -> Reply {
    let (labels, fields) = selectors(params)?;
    let mut store = shared.store.lock();
    let victims: Vec<Value> = store
        .list(&t.def, t.namespace.as_deref())
        .into_iter()
        .map(|o| to_view(&t.def, o))
        .filter(|o| labels.matches(o) && fields.matches(o))
        .collect();
    let stored = t.def.stored();
    let mut items = Vec::new();
    for v in victims {
        let (n, m) = ns_name(&v);
        items.push(to_view(&t.def, ops::delete(&mut store, &stored, &n, &m)?));
    }
    ok(json!({
        "kind": format!("{}List", t.def.kind),
        "apiVersion": t.def.api_version(),
        "metadata": {"resourceVersion": store.current_rv().to_string()},
        "items": items,
    }))
}

/// `GET pods/{name}/log`: the log the simulated kubelet recorded, honouring `tailLines`.
pub fn log(shared: &Shared, t: &Target, params: &HashMap<String, String>) -> Response {
    let store = shared.store.lock();
    if store.get(&t.def, ns(t), name(t)).is_none() {
        return ApiError::not_found(&t.def.plural, name(t)).into_response();
    }
    let text = store
        .pod_logs
        .get(&(ns(t).to_owned(), name(t).to_owned()))
        .cloned()
        .unwrap_or_default();
    let text = match params
        .get("tailLines")
        .and_then(|n| n.parse::<usize>().ok())
    {
        Some(n) => {
            let lines: Vec<&str> = text.lines().collect();
            let mut tail = lines[lines.len().saturating_sub(n)..].join("\n");
            if !tail.is_empty() {
                tail.push('\n');
            }
            tail
        }
        None => text,
    };
    ([(http::header::CONTENT_TYPE, "text/plain")], text).into_response()
}

//! Field ownership of `metadata.labels`, as server-side apply keeps it in
//! `metadata.managedFields` (one entry per manager and operation, FieldsV1
//! `{"f:metadata": {"f:labels": {"f:<key>": {}}}}`):
//!
//! - an apply owns exactly the labels it sends: a label the manager applied before and no
//!   longer sends is removed (unless another manager owns it too); setting a label another
//!   manager owns to a different value is a 409 `Conflict` naming that manager, unless the
//!   apply is forced, which takes the label over;
//! - any other write (create, update, merge or JSON patch) makes its manager the only owner
//!   of the labels it adds or changes; a label it removes is owned by nobody.
//!
//! Only labels are tracked; every other field of an apply is merged as before.

use crate::error::ApiError;
use serde_json::{Map, Value, json};

/// Who writes, as the request names it (`?fieldManager=`, else the User-Agent's product).
#[derive(Clone, Debug)]
pub struct Writer {
    /// The field manager.
    pub manager: String,
    /// `?force=true` on an apply.
    pub force: bool,
}

fn labels(obj: &Value) -> Map<String, Value> {
    obj["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

fn entries(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn owned(entry: &Value) -> Vec<String> {
    entry["fieldsV1"]["f:metadata"]["f:labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix("f:").map(str::to_owned))
        .collect()
}

fn is(entry: &Value, manager: &str, operation: &str) -> bool {
    entry["manager"] == manager && entry["operation"] == operation
}

fn set_owned(entries: &mut Vec<Value>, manager: &str, operation: &str, keys: Vec<String>) {
    let fields: Map<String, Value> = keys
        .into_iter()
        .map(|k| (format!("f:{k}"), json!({})))
        .collect();
    let fields = json!({"f:metadata": {"f:labels": fields}});
    // In place, so a write that changes no ownership leaves the list (and the object) equal.
    match entries.iter_mut().find(|e| is(e, manager, operation)) {
        Some(entry) => entry["fieldsV1"] = fields,
        None => entries.push(json!({
            "manager": manager,
            "operation": operation,
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": fields,
        })),
    }
}

fn disown(entries: &mut [Value], key: &str) {
    for e in entries.iter_mut() {
        if let Some(m) = e["fieldsV1"]["f:metadata"]["f:labels"].as_object_mut() {
            m.remove(&format!("f:{key}"));
        }
    }
}

fn store(obj: &mut Value, labels: Map<String, Value>, mut entries: Vec<Value>) {
    entries.retain(|e| !owned(e).is_empty());
    let meta = &mut obj["metadata"];
    if let Some(m) = meta.as_object_mut() {
        m.remove("managedFields");
        m.remove("labels");
    }
    if !labels.is_empty() {
        meta["labels"] = Value::Object(labels);
    }
    if !entries.is_empty() {
        meta["managedFields"] = Value::Array(entries);
    }
}

/// A non-apply write turns `old` (the stored object, `Null` on create) into `new`: records
/// in `new` who owns which label, ignoring any `managedFields` the client sent.
pub fn record_update(old: &Value, new: &mut Value, writer: &Writer) {
    let before = labels(old);
    let after = labels(new);
    let mut fields = entries(old);
    let mut mine: Vec<String> = fields
        .iter()
        .filter(|e| is(e, &writer.manager, "Update"))
        .flat_map(owned)
        .collect();
    for key in before.keys().filter(|k| !after.contains_key(*k)) {
        disown(&mut fields, key);
        mine.retain(|k| k != key);
    }
    for (key, value) in &after {
        if before.get(key) != Some(value) {
            disown(&mut fields, key);
            mine.push(key.clone());
        }
    }
    mine.sort();
    mine.dedup();
    set_owned(&mut fields, &writer.manager, "Update", mine);
    store(new, after, fields);
}

/// An apply of `applied` (the labels the apply body sends) by `writer` onto `current`:
/// `current` with its labels and `managedFields` as they become, or a 409 `Conflict`.
pub fn apply_labels(
    current: &Value,
    applied: &Map<String, Value>,
    writer: &Writer,
    resource: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let mut labels = labels(current);
    let mut fields = entries(current);
    let manager = writer.manager.as_str();
    let others = |fields: &[Value], key: &str| -> Vec<String> {
        fields
            .iter()
            .filter(|e| !is(e, manager, "Apply") && owned(e).iter().any(|k| k == key))
            .filter_map(|e| e["manager"].as_str().map(str::to_owned))
            .collect()
    };
    for (key, value) in applied {
        let owners = others(&fields, key);
        if labels.get(key) != Some(value) && !owners.is_empty() {
            if !writer.force {
                return Err(ApiError::apply_conflict(resource, name, key, &owners));
            }
            disown(&mut fields, key);
        }
    }
    let before: Vec<String> = fields
        .iter()
        .filter(|e| is(e, manager, "Apply"))
        .flat_map(owned)
        .collect();
    for key in before.iter().filter(|k| !applied.contains_key(*k)) {
        if others(&fields, key).is_empty() {
            labels.remove(key);
        }
    }
    for (key, value) in applied {
        labels.insert(key.clone(), value.clone());
    }
    let mut keys: Vec<String> = applied.keys().cloned().collect();
    keys.sort();
    set_owned(&mut fields, manager, "Apply", keys);
    let mut out = current.clone();
    store(&mut out, labels, fields);
    Ok(out)
}

#[cfg(test)]
mod tests;

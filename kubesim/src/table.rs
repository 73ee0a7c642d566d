//! `Table` responses (`meta.k8s.io/v1`), which `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`: a `Name` column, then a CRD
//! version's `additionalPrinterColumns` (or `Age` for types without any), each cell taken
//! from the object by the column's JSONPath and formatted as the API server formats it
//! (`date` columns as an age such as `5m12s`).

mod cell;

use crate::resources::{PrinterColumn, ResourceDef};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use std::collections::HashMap;

/// Whether the `Accept` header asks for a Table (kubectl always lists a JSON fallback
/// after it, which kubesim then does not need).
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .any(|media| media.split(';').any(|p| p.trim() == "as=Table"))
}

/// What each row carries besides its cells (`?includeObject=`; default `Metadata`).
fn row_object(obj: &Value, params: &HashMap<String, String>) -> Option<Value> {
    match params.get("includeObject").map(String::as_str) {
        Some("None") => None,
        Some("Object") => Some(obj.clone()),
        _ => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"],
        })),
    }
}

/// The `Age` column types without printer columns get.
fn age_column() -> PrinterColumn {
    PrinterColumn {
        name: "Age".into(),
        type_: "date".into(),
        format: String::new(),
        description: "CreationTimestamp is a timestamp representing the server time when this \
                      object was created."
            .into(),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }
}

/// The Table of `objects` of type `def` at `now`; `list_meta` is the list's `metadata`
/// (resourceVersion, continue).
pub fn table(
    def: &ResourceDef,
    objects: &[Value],
    list_meta: Value,
    params: &HashMap<String, String>,
    now: Timestamp,
) -> Value {
    let columns = if def.columns.is_empty() {
        vec![age_column()]
    } else {
        def.columns.clone()
    };
    let mut definitions = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace.",
    })];
    definitions.extend(columns.iter().map(|c| {
        json!({"name": c.name, "type": c.type_, "format": c.format,
               "description": c.description, "priority": c.priority})
    }));
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let mut cells = vec![obj["metadata"]["name"].clone()];
            cells.extend(columns.iter().map(|c| cell::value(obj, c, now)));
            let mut row = json!({"cells": cells});
            if let Some(o) = row_object(obj, params) {
                row["object"] = o;
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

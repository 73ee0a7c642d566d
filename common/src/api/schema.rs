//! Strict validation of a manifest against its CRD's structural schema, as the API server
//! applies it to `kubectl apply --validate=strict`: unknown fields are refused (naming the
//! nearest known one), and types, `minimum`/`maximum`, lengths, `pattern`, `enum`, items
//! and `required` are checked; `x-kubernetes-preserve-unknown-fields` and
//! `x-kubernetes-int-or-string` are honoured. The schema is the one `fleetpulse-hub crds`
//! prints, generated from the same Rust types, so the embedded hub and the API server
//! refuse the same manifests. The schema's CEL rules (`x-kubernetes-validations`) are
//! enforced by the specs' `validate` methods; a test pairs each rule with its Rust side.
//!
//! `metadata` is checked as the API server checks ObjectMeta of a custom resource: known
//! fields only, `name` a DNS subdomain, `namespace` a DNS label, labels and annotations
//! maps of strings.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

/// One place a manifest breaks its schema.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct SchemaError {
    /// JSON path of the field, e.g. `spec.failover.tolerationSecond`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub problem: String,
}

/// The openAPIV3Schema of each fleetpulse kind, from the generated CRDs.
fn schemas() -> &'static HashMap<String, Value> {
    static SCHEMAS: OnceLock<HashMap<String, Value>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        super::crds::all()
            .into_iter()
            .filter_map(|crd| {
                let schema = crd.spec.versions.first()?.schema.as_ref()?;
                let value = serde_json::to_value(schema.open_api_v3_schema.as_ref()?).ok()?;
                Some((crd.spec.names.kind, value))
            })
            .collect()
    })
}

/// Checks `object` (a whole manifest of `kind`) against its CRD schema; every problem
/// found, in document order. `status` is ignored, as `kubectl apply` ignores it.
pub fn check_object(kind: &str, object: &Value) -> Result<(), Vec<SchemaError>> {
    let Some(schema) = schemas().get(kind) else {
        return Err(vec![problem(
            "kind",
            format!("{kind:?} has no fleetpulse schema"),
        )]);
    };
    let mut errors = Vec::new();
    let Some(fields) = object.as_object() else {
        return Err(vec![problem("", "a manifest is an object".into())]);
    };
    for (key, value) in fields {
        match key.as_str() {
            "apiVersion" | "kind" | "status" => {}
            "metadata" => meta::check(value, &mut errors),
            _ => match schema.pointer(&format!("/properties/{}", escape(key))) {
                Some(field) => walk(value, field, key, &mut errors),
                None => errors.push(unknown(key, "", schema)),
            },
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

mod meta;

fn problem(field: &str, problem: String) -> SchemaError {
    SchemaError {
        field: field.to_owned(),
        problem,
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// An unknown field `key` under `path`, with the nearest known name of `schema`.
fn unknown(key: &str, path: &str, schema: &Value) -> SchemaError {
    let known: Vec<&str> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let nearest = known
        .iter()
        .map(|k| (strsim::levenshtein(k, key), *k))
        .filter(|(d, _)| *d <= 3)
        .min();
    let hint = match nearest {
        Some((_, k)) => format!("; did you mean {k:?}?"),
        None => format!("; known fields here: {}", known.join(", ")),
    };
    problem(&join(path, key), format!("unknown field{hint}"))
}

fn walk(value: &Value, schema: &Value, path: &str, errors: &mut Vec<SchemaError>) {
    let flag = |name: &str| schema.get(name).and_then(Value::as_bool) == Some(true);
    if value.is_null() {
        if !flag("nullable") {
            errors.push(problem(
                path,
                "must not be null; remove the field or set a value".into(),
            ));
        }
        return;
    }
    if flag("x-kubernetes-int-or-string") {
        if !(value.is_i64() || value.is_u64() || value.is_string()) {
            errors.push(problem(path, "must be an integer or a string".into()));
        }
        return;
    }
    for (keyword, need) in [("anyOf", 1..=usize::MAX), ("oneOf", 1..=1)] {
        if let Some(options) = schema.get(keyword).and_then(Value::as_array) {
            let passing = options
                .iter()
                .filter(|o| {
                    let mut inner = Vec::new();
                    walk(value, o, path, &mut inner);
                    inner.is_empty()
                })
                .count();
            if !need.contains(&passing) {
                errors.push(problem(
                    path,
                    format!("does not match {keyword} of its schema"),
                ));
            }
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        errors.push(problem(path, format!("must be one of {}", list.join(", "))));
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => object(value, schema, path, errors),
        Some("array") => array(value, schema, path, errors),
        Some("string") => string(value, schema, path, errors),
        Some("integer") => number(value, schema, path, true, errors),
        Some("number") => number(value, schema, path, false, errors),
        Some("boolean") if !value.is_boolean() => {
            errors.push(problem(path, "must be true or false".into()));
        }
        _ => {}
    }
}

fn object(value: &Value, schema: &Value, path: &str, errors: &mut Vec<SchemaError>) {
    let Some(fields) = value.as_object() else {
        errors.push(problem(path, "must be an object (key: value pairs)".into()));
        return;
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let preserve = schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true);
    for (key, field) in fields {
        match (properties.and_then(|p| p.get(key)), additional) {
            (Some(s), _) | (None, Some(s)) => walk(field, s, &join(path, key), errors),
            (None, None) if preserve || properties.is_none() => {}
            (None, None) => errors.push(unknown(key, path, schema)),
        }
    }
    required(fields, schema, path, errors);
}

fn required(
    fields: &Map<String, Value>,
    schema: &Value,
    path: &str,
    errors: &mut Vec<SchemaError>,
) {
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !fields.contains_key(name) {
            errors.push(problem(&join(path, name), "is required".into()));
        }
    }
}

fn array(value: &Value, schema: &Value, path: &str, errors: &mut Vec<SchemaError>) {
    let Some(items) = value.as_array() else {
        errors.push(problem(path, "must be a list".into()));
        return;
    };
    let bound = |name: &str| schema.get(name).and_then(Value::as_u64);
    if let Some(min) = bound("minItems").filter(|m| (items.len() as u64) < *m) {
        errors.push(problem(path, format!("must have at least {min} items")));
    }
    if let Some(max) = bound("maxItems").filter(|m| (items.len() as u64) > *m) {
        errors.push(problem(path, format!("must have at most {max} items")));
    }
    if let Some(item) = schema.get("items") {
        for (i, v) in items.iter().enumerate() {
            walk(v, item, &format!("{path}[{i}]"), errors);
        }
    }
}

fn string(value: &Value, schema: &Value, path: &str, errors: &mut Vec<SchemaError>) {
    let Some(s) = value.as_str() else {
        errors.push(problem(
            path,
            format!("must be a string, not {value}; quote it"),
        ));
        return;
    };
    let chars = s.chars().count() as u64;
    let bound = |name: &str| schema.get(name).and_then(Value::as_u64);
    if let Some(min) = bound("minLength").filter(|m| chars < *m) {
        errors.push(problem(
            path,
            format!("must be at least {min} characters long"),
        ));
    }
    if let Some(max) = bound("maxLength").filter(|m| chars > *m) {
        errors.push(problem(
            path,
            format!("must be at most {max} characters long"),
        ));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        && compiled(pattern).is_some_and(|re| !re.is_match(s))
    {
        errors.push(problem(
            path,
            format!("{s:?} does not match the pattern {pattern}"),
        ));
    }
}

/// The schema's `pattern`s, compiled once: a fleet's manifests test the same few patterns
/// thousands of times.
fn compiled(pattern: &str) -> Option<regex::Regex> {
    static CACHE: OnceLock<std::sync::Mutex<HashMap<String, Option<regex::Regex>>>> =
        OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    cache
        .entry(pattern.to_owned())
        .or_insert_with(|| regex::Regex::new(pattern).ok())
        .clone()
}

fn number(value: &Value, schema: &Value, path: &str, integer: bool, errors: &mut Vec<SchemaError>) {
    let is_integer = value.is_i64() || value.is_u64();
    if (integer && !is_integer) || !value.is_number() {
        let what = if integer {
            "a whole number"
        } else {
            "a number"
        };
        errors.push(problem(path, format!("must be {what}, not {value}")));
        return;
    }
    let n = value.as_f64().unwrap_or_default();
    let limit = |name: &str| schema.get(name).and_then(Value::as_f64);
    let exclusive = |name: &str| schema.get(name).and_then(Value::as_bool) == Some(true);
    if let Some(min) = limit("minimum")
        && (n < min || (exclusive("exclusiveMinimum") && n == min))
    {
        errors.push(problem(
            path,
            format!("must be at least {min}, not {value}"),
        ));
    }
    if let Some(max) = limit("maximum")
        && (n > max || (exclusive("exclusiveMaximum") && n == max))
    {
        errors.push(problem(path, format!("must be at most {max}, not {value}")));
    }
    let format = schema.get("format").and_then(Value::as_str);
    if format == Some("int32") && !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&n) {
        errors.push(problem(path, format!("{value} does not fit in 32 bits")));
    }
    if matches!(format, Some("uint32" | "uint64" | "uint8" | "uint16")) && n < 0.0 {
        errors.push(problem(path, format!("must not be negative, not {value}")));
    }
}

#[cfg(test)]
mod tests;

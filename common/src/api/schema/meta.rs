//! `metadata` of a custom resource, as the API server checks it.

use serde_json::Value;

use super::{SchemaError, join, problem};

/// ObjectMeta fields a manifest may set (the rest are the server's).
const FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// A DNS-1123 label: lowercase alphanumerics and `-`, at most 63, alphanumeric at both ends.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 subdomain: labels joined by `.`, at most 253.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

pub(super) fn check(value: &Value, errors: &mut Vec<SchemaError>) {
    let Some(fields) = value.as_object() else {
        errors.push(problem("metadata", "must be an object".into()));
        return;
    };
    for (key, field) in fields {
        let path = join("metadata", key);
        match key.as_str() {
            "name" => match field.as_str() {
                Some(n) if is_dns_subdomain(n) => {}
                _ => errors.push(problem(
                    &path,
                    format!(
                        "{field} is not a DNS subdomain: lowercase letters, digits, '-' and '.', \
                         at most 253 characters, starting and ending alphanumeric"
                    ),
                )),
            },
            "namespace" => match field.as_str() {
                Some(n) if is_dns_label(n) => {}
                _ => errors.push(problem(
                    &path,
                    format!(
                        "{field} is not a DNS label: lowercase letters, digits and '-', at most \
                         63 characters, starting and ending alphanumeric"
                    ),
                )),
            },
            "labels" | "annotations" => string_map(field, &path, errors),
            known if FIELDS.contains(&known) => {}
            _ => {
                let nearest = FIELDS
                    .iter()
                    .map(|k| (strsim::levenshtein(k, key), *k))
                    .filter(|(d, _)| *d <= 3)
                    .min();
                let hint = nearest.map_or(String::new(), |(_, k)| format!("; did you mean {k:?}?"));
                errors.push(problem(&path, format!("unknown field{hint}")));
            }
        }
    }
}

fn string_map(value: &Value, path: &str, errors: &mut Vec<SchemaError>) {
    let Some(map) = value.as_object() else {
        errors.push(problem(path, "must be a map of strings".into()));
        return;
    };
    for (k, v) in map {
        if !v.is_string() {
            errors.push(problem(
                &format!("{path}.{k}"),
                format!("must be a string, not {v}; quote it"),
            ));
        }
    }
}

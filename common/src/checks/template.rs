//! Templates in a selector's `name` and `namespace`, over the MemberCluster:
//! `{{ .Cluster.metadata.name }}`, `{{ .Cluster.metadata.namespace }}`,
//! `{{ .Cluster.metadata.labels.KEY }}` (or `{{ index .Cluster.metadata.labels "KEY" }}`),
//! and the same for `annotations`. The Go-template subset Sveltos users write; a key that
//! does not exist is an error, never an empty string.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A template could not be rendered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TemplateError {
    /// `{{` without `}}`.
    #[error("template {template:?}: `{{{{` without a closing `}}}}`")]
    Unclosed {
        /// The template.
        template: String,
    },
    /// An expression that is not one of the supported forms.
    #[error(
        "template {template:?}: unsupported expression {expression:?}; use .Cluster.metadata.name, \
         .Cluster.metadata.namespace, .Cluster.metadata.labels.KEY or .Cluster.metadata.annotations.KEY"
    )]
    Unsupported {
        /// The template.
        template: String,
        /// The expression.
        expression: String,
    },
    /// A label or annotation the MemberCluster does not have.
    #[error("template {template:?}: the MemberCluster has no {map} key {key:?}")]
    MissingKey {
        /// The template.
        template: String,
        /// `labels` or `annotations`.
        map: &'static str,
        /// The key.
        key: String,
    },
}

/// Renders `template` over the MemberCluster's metadata.
pub fn render(template: &str, cluster: &ObjectMeta) -> Result<String, TemplateError> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| TemplateError::Unclosed {
            template: template.into(),
        })?;
        let expression = after[..end]
            .trim()
            .trim_start_matches('-')
            .trim_end_matches('-')
            .trim();
        out.push_str(&evaluate(template, expression, cluster)?);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn evaluate(template: &str, expression: &str, meta: &ObjectMeta) -> Result<String, TemplateError> {
    let unsupported = || TemplateError::Unsupported {
        template: template.into(),
        expression: expression.into(),
    };
    let lookup = |map: &'static str, values: &Option<BTreeMap<String, String>>, key: &str| {
        values
            .as_ref()
            .and_then(|m| m.get(key))
            .cloned()
            .ok_or_else(|| TemplateError::MissingKey {
                template: template.into(),
                map,
                key: key.into(),
            })
    };
    if let Some(args) = expression.strip_prefix("index ") {
        let (map, key) = args
            .trim()
            .split_once(char::is_whitespace)
            .ok_or_else(unsupported)?;
        let key = key.trim().trim_matches('"');
        return match map {
            ".Cluster.metadata.labels" => lookup("labels", &meta.labels, key),
            ".Cluster.metadata.annotations" => lookup("annotations", &meta.annotations, key),
            _ => Err(unsupported()),
        };
    }
    match expression {
        ".Cluster.metadata.name" => Ok(meta.name.clone().unwrap_or_default()),
        ".Cluster.metadata.namespace" => Ok(meta.namespace.clone().unwrap_or_default()),
        _ => {
            if let Some(key) = expression.strip_prefix(".Cluster.metadata.labels.") {
                lookup("labels", &meta.labels, key)
            } else if let Some(key) = expression.strip_prefix(".Cluster.metadata.annotations.") {
                lookup("annotations", &meta.annotations, key)
            } else {
                Err(unsupported())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> ObjectMeta {
        ObjectMeta {
            name: Some("edge-1".into()),
            namespace: Some("fleet".into()),
            labels: Some([("region".to_owned(), "eu".to_owned())].into()),
            annotations: Some([("team/owner".to_owned(), "ops".to_owned())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn renders_names_namespaces_labels_and_annotations() {
        let m = meta();
        assert_eq!(
            render("{{ .Cluster.metadata.name }}", &m).unwrap(),
            "edge-1"
        );
        assert_eq!(
            render(
                "metric-{{.Cluster.metadata.name}}-{{ .Cluster.metadata.namespace }}",
                &m
            )
            .unwrap(),
            "metric-edge-1-fleet"
        );
        assert_eq!(
            render("{{ .Cluster.metadata.labels.region }}", &m).unwrap(),
            "eu"
        );
        assert_eq!(
            render(
                r#"{{ index .Cluster.metadata.annotations "team/owner" }}"#,
                &m
            )
            .unwrap(),
            "ops"
        );
        assert_eq!(render("plain", &m).unwrap(), "plain");
    }

    #[test]
    fn unknown_keys_and_expressions_are_errors_not_empty_strings() {
        let m = meta();
        assert!(matches!(
            render("{{ .Cluster.metadata.labels.zone }}", &m),
            Err(TemplateError::MissingKey { .. })
        ));
        assert!(matches!(
            render("{{ .Cluster.spec.x }}", &m),
            Err(TemplateError::Unsupported { .. })
        ));
        assert!(matches!(
            render("{{ .Cluster.metadata.name", &m),
            Err(TemplateError::Unclosed { .. })
        ));
    }
}

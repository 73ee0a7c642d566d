//! What a `CustomResourceDefinition` declares for each served version: names, scope, the
//! status subresource, short names and categories, printer columns and the schema.

use super::ResourceDef;
use serde_json::Value;
use std::sync::Arc;

/// One of a CRD version's `additionalPrinterColumns`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type: `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    /// OpenAPI format, e.g. `int32` (often empty).
    pub format: String,
    /// What the column shows.
    pub description: String,
    /// 0: always shown; higher: only with `-o wide`.
    pub priority: i64,
    /// Simple JSONPath into the object, e.g. `.status.conditions[?(@.type=="Ready")].status`.
    pub json_path: String,
}

impl PrinterColumn {
    fn parse(v: &Value) -> Option<Self> {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        Some(Self {
            name: v["name"].as_str()?.to_owned(),
            type_: s("type"),
            format: s("format"),
            description: s("description"),
            priority: v["priority"].as_i64().unwrap_or(0),
            json_path: v["jsonPath"].as_str()?.to_owned(),
        })
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// The resource types a `CustomResourceDefinition` object declares, one per served version.
pub fn from_crd(crd: &Value) -> Vec<ResourceDef> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default();
    let kind = names["kind"].as_str().unwrap_or_default();
    let singular = names["singular"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map_or_else(|| kind.to_lowercase(), str::to_owned);
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    versions
        .iter()
        .filter(|v| v["served"].as_bool().unwrap_or(true))
        .filter_map(|v| {
            let version = v["name"].as_str()?;
            let mut def = ResourceDef::new(group, version, plural, kind, namespaced);
            def.singular.clone_from(&singular);
            def.status_subresource = v["subresources"].get("status").is_some();
            def.short_names = strings(&names["shortNames"]);
            def.categories = strings(&names["categories"]);
            def.columns = v["additionalPrinterColumns"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(PrinterColumn::parse)
                .collect();
            def.schema = v["schema"]
                .get("openAPIV3Schema")
                .filter(|s| s.is_object())
                .map(|s| Arc::new(s.clone()));
            Some(def)
        })
        .collect()
}

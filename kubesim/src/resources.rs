//! The registry of served resource types: the built-in kinds kubesim knows at start and the
//! custom resources added when a `CustomResourceDefinition` is created.

use serde_json::{Value, json};

/// Verbs advertised in discovery for a top-level resource.
const RESOURCE_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// One served resource type at one group/version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group, empty for the core group.
    pub group: String,
    /// API version inside the group, e.g. `v1`.
    pub version: String,
    /// Plural resource name used in URLs, e.g. `pods`.
    pub plural: String,
    /// Singular name, e.g. `pod`.
    pub singular: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
    /// Whether objects live inside a namespace.
    pub namespaced: bool,
    /// Whether the type has a `status` subresource (main-resource writes then ignore `.status`).
    pub status_subresource: bool,
}

impl ResourceDef {
    fn new(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            singular: kind.to_lowercase(),
            kind: kind.to_owned(),
            namespaced,
            status_subresource: false,
        }
    }

    fn with_status(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    /// `apiVersion` string of objects of this type (`v1` or `group/version`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Storage key shared by every version of this resource: `group/plural`.
    pub fn storage_key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }

    /// Discovery entries (`APIResource` JSON) for this resource and its subresources.
    pub fn discovery_entries(&self) -> Vec<Value> {
        let mut out = vec![json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": RESOURCE_VERBS,
        })];
        if self.status_subresource {
            out.push(json!({
                "name": format!("{}/status", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if self.group.is_empty() && self.plural == "pods" {
            out.push(json!({
                "name": "pods/log",
                "singularName": "",
                "namespaced": true,
                "kind": "Pod",
                "verbs": ["get"],
            }));
        }
        out
    }
}

/// The built-in resource types served from start.
pub fn builtins() -> Vec<ResourceDef> {
    vec![
        ResourceDef::new("", "v1", "namespaces", "Namespace", false).with_status(),
        ResourceDef::new("", "v1", "nodes", "Node", false).with_status(),
        ResourceDef::new("", "v1", "pods", "Pod", true).with_status(),
        ResourceDef::new("", "v1", "secrets", "Secret", true),
        ResourceDef::new("", "v1", "configmaps", "ConfigMap", true),
        ResourceDef::new("", "v1", "events", "Event", true),
        ResourceDef::new("", "v1", "services", "Service", true).with_status(),
        ResourceDef::new("", "v1", "serviceaccounts", "ServiceAccount", true),
        ResourceDef::new("coordination.k8s.io", "v1", "leases", "Lease", true),
        ResourceDef::new("events.k8s.io", "v1", "events", "Event", true),
        ResourceDef::new(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
        )
        .with_status(),
    ]
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
            Some(def)
        })
        .collect()
}

/// The set of served resource types.
#[derive(Debug, Clone)]
pub struct Registry {
    defs: Vec<ResourceDef>,
}

impl Default for Registry {
    fn default() -> Self {
        Self { defs: builtins() }
    }
}

impl Registry {
    /// Looks up a resource by group, version and plural name.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceDef> {
        self.defs
            .iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
    }

    /// All served resource types.
    pub fn all(&self) -> &[ResourceDef] {
        &self.defs
    }

    /// Adds (or replaces) the types declared by a CRD.
    pub fn register_crd(&mut self, crd: &Value) {
        self.unregister_crd(crd);
        self.defs.extend(from_crd(crd));
    }

    /// Removes the types declared by a CRD.
    pub fn unregister_crd(&mut self, crd: &Value) {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
        self.defs
            .retain(|d| !(d.group == group && d.plural == plural));
    }

    /// Groups other than core, each with its versions in order of first appearance.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for d in self.defs.iter().filter(|d| !d.group.is_empty()) {
            match out.iter_mut().find(|(g, _)| *g == d.group) {
                Some((_, vs)) if !vs.contains(&d.version) => vs.push(d.version.clone()),
                Some(_) => {}
                None => out.push((d.group.clone(), vec![d.version.clone()])),
            }
        }
        out
    }
}

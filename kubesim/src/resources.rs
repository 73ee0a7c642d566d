//! The registry of served resource types: the built-in kinds kubesim knows at start and the
//! custom resources added when a `CustomResourceDefinition` is created ([`crd`]).

pub mod crd;

use serde_json::{Value, json};
use std::sync::Arc;

pub use crd::{PrinterColumn, from_crd};

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
    /// Short names advertised in discovery (`kubectl get mc`).
    pub short_names: Vec<String>,
    /// Categories advertised in discovery (`kubectl get fleetpulse`).
    pub categories: Vec<String>,
    /// Table columns after `Name` (a CRD's `additionalPrinterColumns`); empty: `Age` only.
    pub columns: Vec<PrinterColumn>,
    /// The OpenAPI v3 schema of the objects (a CRD version's `schema.openAPIV3Schema`).
    pub schema: Option<Arc<Value>>,
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
            short_names: Vec::new(),
            categories: Vec::new(),
            columns: Vec::new(),
            schema: None,
        }
    }

    fn with_status(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    fn short(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|n| (*n).to_owned()).collect();
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

    /// `events.k8s.io/v1` Events: served from the core `v1` Event store, converted.
    pub fn is_events_v1(&self) -> bool {
        self.group == "events.k8s.io" && self.plural == "events"
    }

    /// The type its objects are stored as: the core `v1` Event for `events.k8s.io/v1`
    /// Events (one store behind both APIs, as in Kubernetes), else itself.
    pub fn stored(&self) -> ResourceDef {
        if self.is_events_v1() {
            ResourceDef::new("", "v1", "events", "Event", true)
        } else {
            self.clone()
        }
    }

    /// Storage key shared by every version of this resource: `group/plural`.
    pub fn storage_key(&self) -> String {
        if self.is_events_v1() {
            return "/events".to_owned();
        }
        format!("{}/{}", self.group, self.plural)
    }

    /// Discovery entries (`APIResource` JSON) for this resource and its subresources.
    pub fn discovery_entries(&self) -> Vec<Value> {
        let mut main = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": RESOURCE_VERBS,
        });
        if !self.short_names.is_empty() {
            main["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            main["categories"] = json!(self.categories);
        }
        let mut out = vec![main];
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

/// The built-in resource types served from start, with the short names Kubernetes gives
/// them.
pub fn builtins() -> Vec<ResourceDef> {
    vec![
        ResourceDef::new("", "v1", "namespaces", "Namespace", false)
            .with_status()
            .short(&["ns"]),
        ResourceDef::new("", "v1", "nodes", "Node", false)
            .with_status()
            .short(&["no"]),
        ResourceDef::new("", "v1", "pods", "Pod", true)
            .with_status()
            .short(&["po"]),
        ResourceDef::new("", "v1", "secrets", "Secret", true),
        ResourceDef::new("", "v1", "configmaps", "ConfigMap", true).short(&["cm"]),
        ResourceDef::new("", "v1", "events", "Event", true).short(&["ev"]),
        ResourceDef::new("", "v1", "services", "Service", true)
            .with_status()
            .short(&["svc"]),
        ResourceDef::new("", "v1", "serviceaccounts", "ServiceAccount", true).short(&["sa"]),
        ResourceDef::new("coordination.k8s.io", "v1", "leases", "Lease", true),
        ResourceDef::new(
            "authentication.k8s.io",
            "v1",
            "tokenreviews",
            "TokenReview",
            false,
        ),
        ResourceDef::new(
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "SubjectAccessReview",
            false,
        ),
        ResourceDef::new("events.k8s.io", "v1", "events", "Event", true).short(&["ev"]),
        ResourceDef::new(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
        )
        .with_status()
        .short(&["crd", "crds"]),
    ]
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

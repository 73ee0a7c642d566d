//! Kubernetes RBAC, evaluated the way the API server does for the rules the charts render:
//! which (verb, group, resource, subresource, namespace, name) requests a service
//! account's bindings allow, and which granted permissions no recorded request used.

use std::collections::BTreeSet;

use fleetpulse_kubesim::RequestRecord;
use serde::Deserialize;
use serde_json::Value;

/// Verbs that change objects (or grant more).
pub const WRITE_VERBS: &[&str] = &[
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "escalate",
    "bind",
    "impersonate",
];

/// One PolicyRule.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct Rule {
    /// API groups ("" is core).
    pub api_groups: Vec<String>,
    /// Resources, `resource/subresource` for subresources.
    pub resources: Vec<String>,
    /// Verbs.
    pub verbs: Vec<String>,
    /// Object names the rule is limited to (none: any).
    pub resource_names: Vec<String>,
    /// Non-resource URLs (ClusterRole only).
    #[serde(rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

/// A rule as bound to the service account: cluster-wide or in one namespace.
#[derive(Clone, Debug)]
pub struct Grant {
    /// `None`: every namespace and cluster-scoped objects (a ClusterRoleBinding).
    pub namespace: Option<String>,
    /// `Role ns/name` or `ClusterRole name`, for messages.
    pub source: String,
    /// The rule.
    pub rule: Rule,
}

fn rules_of(role: &Value) -> Vec<Rule> {
    serde_json::from_value(role["rules"].clone()).unwrap_or_default()
}

fn binds(binding: &Value, service_account: &str, namespace: &str) -> bool {
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| {
            s["kind"] == "ServiceAccount"
                && s["name"] == service_account
                && s["namespace"] == namespace
        })
}

fn find<'a>(
    docs: &'a [Value],
    kind: &str,
    name: &str,
    namespace: Option<&str>,
) -> Option<&'a Value> {
    docs.iter().find(|d| {
        d["kind"] == kind
            && d["metadata"]["name"] == name
            && namespace.is_none_or(|ns| d["metadata"]["namespace"] == ns)
    })
}

/// Every rule the rendered `docs` grant to service account `namespace/service_account`.
pub fn grants(docs: &[Value], service_account: &str, namespace: &str) -> Vec<Grant> {
    let mut out = Vec::new();
    for binding in docs.iter().filter(|d| binds(d, service_account, namespace)) {
        let role_ref = &binding["roleRef"];
        let role_name = role_ref["name"].as_str().unwrap_or_default();
        let role_kind = role_ref["kind"].as_str().unwrap_or_default();
        let (scope, role) = match binding["kind"].as_str() {
            Some("ClusterRoleBinding") => (None, find(docs, "ClusterRole", role_name, None)),
            Some("RoleBinding") => {
                let ns = binding["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default();
                let role = if role_kind == "Role" {
                    find(docs, "Role", role_name, Some(ns))
                } else {
                    find(docs, "ClusterRole", role_name, None)
                };
                (Some(ns.to_owned()), role)
            }
            _ => continue,
        };
        let role =
            role.unwrap_or_else(|| panic!("{role_kind} {role_name} is bound but not rendered"));
        let source = match &scope {
            Some(ns) => format!("{role_kind} {ns}/{role_name}"),
            None => format!("{role_kind} {role_name}"),
        };
        for rule in rules_of(role) {
            out.push(Grant {
                namespace: scope.clone(),
                source: source.clone(),
                rule,
            });
        }
    }
    out
}

fn matches(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == "*" || v == value)
}

/// The resource of a request as RBAC names it: `pods` or `pods/log`.
pub fn resource_of(request: &RequestRecord) -> String {
    match &request.subresource {
        Some(sub) => format!("{}/{sub}", request.resource),
        None => request.resource.clone(),
    }
}

/// Whether `grant` allows `request`.
pub fn allows(grant: &Grant, request: &RequestRecord) -> bool {
    let rule = &grant.rule;
    let in_scope = match &grant.namespace {
        None => true,
        Some(ns) => request.namespace.as_deref() == Some(ns.as_str()),
    };
    // resourceNames can only match requests that name an object (never create, list or
    // watch), as in the API server.
    let named = rule.resource_names.is_empty()
        || request
            .name
            .as_ref()
            .is_some_and(|n| rule.resource_names.contains(n));
    in_scope
        && named
        && matches(&rule.verbs, &request.verb)
        && matches(&rule.api_groups, &request.group)
        && matches(&rule.resources, &resource_of(request))
}

/// The requests no grant allows, described.
pub fn denied(grants: &[Grant], requests: &[RequestRecord]) -> BTreeSet<String> {
    requests
        .iter()
        .filter(|r| !grants.iter().any(|g| allows(g, r)))
        .map(describe)
        .collect()
}

/// A request as `verb group/resource in namespace name`.
pub fn describe(r: &RequestRecord) -> String {
    format!(
        "{} {}/{} in {} {}",
        r.verb,
        if r.group.is_empty() { "core" } else { &r.group },
        resource_of(r),
        r.namespace.as_deref().unwrap_or("(cluster)"),
        r.name.as_deref().unwrap_or("(any)")
    )
}

/// Each (verb, group, resource) a grant gives that no request used, as
/// `source: verb group/resource`. Non-resource URLs are listed as `source: verb URL`.
pub fn unused(grants: &[Grant], requests: &[RequestRecord]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for grant in grants {
        let rule = &grant.rule;
        for verb in &rule.verbs {
            for url in &rule.non_resource_urls {
                out.insert(format!("{}: {verb} {url}", grant.source));
            }
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    let single = Grant {
                        rule: Rule {
                            api_groups: vec![group.clone()],
                            resources: vec![resource.clone()],
                            verbs: vec![verb.clone()],
                            ..rule.clone()
                        },
                        ..grant.clone()
                    };
                    if !requests.iter().any(|r| allows(&single, r)) {
                        let group = if group.is_empty() { "core" } else { group };
                        out.insert(format!("{}: {verb} {group}/{resource}", grant.source));
                    }
                }
            }
        }
    }
    out
}

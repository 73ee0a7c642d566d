//! Mirror values of the hub chart: RBAC `get` and `patch` on exactly the enabled mirror
//! kinds (Argo CD Secrets only in the Argo CD namespace), the defaults passed as
//! `--mirror-default` flags, a default of a kind not enabled refused with the fix, and the
//! rendering valid on every Kubernetes version tested.

use super::rbac::{self, Grant};
use super::tools::{
    Chart, KUBERNETES_VERSIONS, NAMESPACE, container, documents, one, render, template, validate,
};

/// Every mirror kind with the API group and resource the hub writes.
pub const KINDS: &[(&str, &str, &str)] = &[
    ("sveltoscluster", "lib.projectsveltos.io", "sveltosclusters"),
    ("capi-cluster", "cluster.x-k8s.io", "clusters"),
    ("argocd-secret", "", "secrets"),
    (
        "ocm-managedcluster",
        "cluster.open-cluster-management.io",
        "managedclusters",
    ),
    ("karmada-cluster", "cluster.karmada.io", "clusters"),
    (
        "kubefleet-membercluster",
        "cluster.kubernetes-fleet.io",
        "memberclusters",
    ),
];

fn with_kinds(kinds: &[&str]) -> Vec<String> {
    vec![
        "--set".to_owned(),
        format!("mirrors.kinds={{{}}}", kinds.join(",")),
    ]
}

fn mirror_grants(args: &[String]) -> Vec<Grant> {
    let docs = documents(&render(Chart::Hub, args));
    rbac::grants(&docs, &Chart::Hub.fullname(), NAMESPACE)
        .into_iter()
        .filter(|g| !g.source.ends_with("-enrolment"))
        .filter(|g| {
            KINDS.iter().any(|(_, group, resource)| {
                g.rule.api_groups.iter().any(|x| x == group)
                    && g.rule.resources.iter().any(|x| x == resource)
            })
        })
        .collect()
}

#[test]
fn mirror_rbac_grants_get_and_patch_on_exactly_the_enabled_kinds() {
    assert!(
        mirror_grants(&[]).is_empty(),
        "no mirror kind enabled by default"
    );
    for (kind, group, resource) in KINDS {
        let grants = mirror_grants(&with_kinds(&[kind]));
        assert_eq!(grants.len(), 1, "{kind}: {grants:?}");
        let g = &grants[0];
        assert_eq!(
            (g.rule.api_groups.as_slice(), g.rule.resources.as_slice()),
            (&[group.to_string()][..], &[resource.to_string()][..]),
            "{kind}"
        );
        assert_eq!(g.rule.verbs, ["get", "patch"], "{kind}");
        assert!(g.rule.resource_names.is_empty());
        let namespace = (*kind == "argocd-secret").then(|| "argocd".to_owned());
        assert_eq!(g.namespace, namespace, "{kind}: {}", g.source);
    }
    let all: Vec<&str> = KINDS.iter().map(|(k, ..)| *k).collect();
    let mut args = with_kinds(&all);
    args.extend([
        "--set".to_owned(),
        "mirrors.argocdNamespace=gitops".to_owned(),
    ]);
    let grants = mirror_grants(&args);
    assert_eq!(grants.len(), KINDS.len(), "{grants:?}");
    let secrets: Vec<&Grant> = grants
        .iter()
        .filter(|g| g.rule.resources == ["secrets"])
        .collect();
    assert_eq!(secrets[0].namespace.as_deref(), Some("gitops"));
}

#[test]
fn mirror_defaults_become_serve_flags_and_a_default_of_a_disabled_kind_is_refused() {
    let mut args = with_kinds(&["sveltoscluster", "argocd-secret"]);
    args.extend([
        "--set".to_owned(),
        "mirrors.defaults={sveltoscluster,argocd-secret:namespace=argocd\\,name-label=argocd.example.com/secret}".to_owned(),
        "--set".to_owned(),
        "mirrors.resyncSeconds=120".to_owned(),
    ]);
    let docs = documents(&render(Chart::Hub, &args));
    let hub = container(one(&docs, "Deployment"), "hub");
    let flags: Vec<&str> = hub["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .filter(|a| a.starts_with("--mirror"))
        .collect();
    assert_eq!(
        flags,
        [
            "--mirror-resync-seconds=120",
            "--mirror-default=sveltoscluster",
            "--mirror-default=argocd-secret:namespace=argocd,name-label=argocd.example.com/secret",
        ]
    );
    let refused = template(
        Chart::Hub,
        &[
            "--set".to_owned(),
            "mirrors.defaults={karmada-cluster}".to_owned(),
        ],
    )
    .unwrap_err();
    assert!(
        refused.contains("mirrors.defaults[0] mirrors onto karmada-cluster, which mirrors.kinds does not enable: add karmada-cluster to mirrors.kinds"),
        "{refused}"
    );
    let unknown = template(Chart::Hub, &with_kinds(&["sveltos"])).unwrap_err();
    assert!(
        unknown.contains("/mirrors/kinds/0") && unknown.contains("must be one of 'sveltoscluster'"),
        "{unknown}"
    );
    let none = documents(&render(Chart::Hub, &[]));
    let hub = container(one(&none, "Deployment"), "hub");
    assert!(
        !hub["args"].to_string().contains("--mirror"),
        "no mirror flag unless enabled"
    );
}

#[test]
fn the_chart_with_every_mirror_kind_validates_on_every_kubernetes_version() {
    let all: Vec<&str> = KINDS.iter().map(|(k, ..)| *k).collect();
    let yaml = render(Chart::Hub, &with_kinds(&all));
    for version in KUBERNETES_VERSIONS {
        if let Err(e) = validate(&yaml, version) {
            panic!("Kubernetes {version}: {e}");
        }
    }
}

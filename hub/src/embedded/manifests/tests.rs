use std::fs;

use super::*;

fn cluster(name: &str) -> String {
    format!(
        "apiVersion: fleetpulse.io/v1alpha1\nkind: MemberCluster\nmetadata:\n  name: {name}\n  namespace: fleet\nspec: {{}}\n"
    )
}

fn names(objects: &Objects) -> Vec<String> {
    objects
        .member_clusters
        .iter()
        .map(|m| m.metadata.name.clone().unwrap())
        .collect()
}

#[test]
fn multi_document_files_in_subdirectories_are_read() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("sub")).unwrap();
    fs::write(
        dir.path().join("a.yaml"),
        format!("{}---\n{}", cluster("a"), cluster("b")),
    )
    .unwrap();
    fs::write(
        dir.path().join("sub/sets.yml"),
        "apiVersion: fleetpulse.io/v1alpha1\nkind: ClusterSet\nmetadata: {name: prod}\nspec: {maxReplicas: 2}\n",
    )
    .unwrap();
    fs::write(dir.path().join("README.md"), "not a manifest").unwrap();
    let scan = ManifestDir::new(dir.path()).scan();
    assert!(scan.errors.is_empty(), "{:?}", scan.errors);
    assert!(scan.changed);
    assert_eq!(names(&scan.objects), ["a", "b"]);
    assert_eq!(scan.objects.cluster_sets[0].spec.set.max_replicas, 2);
}

#[test]
fn a_broken_edit_keeps_the_last_good_objects_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.yaml");
    fs::write(&file, cluster("a")).unwrap();
    let mut watched = ManifestDir::new(dir.path());
    assert_eq!(names(&watched.scan().objects), ["a"]);
    fs::write(
        &file,
        "apiVersion: fleetpulse.io/v1alpha1\nkind: MemberCluster\nmetadata: [oops\n",
    )
    .unwrap();
    let scan = watched.scan();
    assert_eq!(names(&scan.objects), ["a"], "nothing lost");
    assert_eq!(scan.errors.len(), 1);
    assert_eq!(scan.errors[0].file, file);
    let again = watched.scan();
    assert!(
        again.errors.is_empty() && !again.changed,
        "reported once per edit"
    );
}

#[test]
fn invalid_spec_is_refused_with_the_field_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("a.yaml"),
        format!(
            "{}---\n{}",
            cluster("ok"),
            cluster("bad").replace(
                "spec: {}",
                "spec: {heartbeat: {intervalSeconds: 30, gracePeriodSeconds: 20}}"
            )
        ),
    )
    .unwrap();
    let scan = ManifestDir::new(dir.path()).scan();
    let e = &scan.errors[0];
    assert_eq!(e.document, Some(2));
    assert!(e.problem.contains("MemberCluster bad"), "{e}");
    assert!(e.problem.contains("gracePeriodSeconds"), "{e}");
    assert!(
        scan.objects.member_clusters.is_empty(),
        "a bad file contributes nothing new"
    );
}

#[test]
fn duplicates_across_files_keep_the_first_and_unknown_kinds_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("1.yaml"), cluster("a")).unwrap();
    fs::write(dir.path().join("2.yaml"), cluster("a")).unwrap();
    fs::write(
        dir.path().join("3.yaml"),
        "apiVersion: fleetpulse.io/v1alpha1\nkind: Cluster\nmetadata: {name: x}\n",
    )
    .unwrap();
    let scan = ManifestDir::new(dir.path()).scan();
    assert_eq!(names(&scan.objects), ["a"]);
    let problems: Vec<String> = scan.errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("also defined in")));
    assert!(problems.iter().any(|p| p.contains("\"Cluster\"")));
}

#[test]
fn removing_a_file_removes_its_objects() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.yaml"), cluster("a")).unwrap();
    fs::write(dir.path().join("b.yaml"), cluster("b")).unwrap();
    let mut watched = ManifestDir::new(dir.path());
    watched.scan();
    fs::remove_file(dir.path().join("b.yaml")).unwrap();
    let scan = watched.scan();
    assert!(scan.changed);
    assert_eq!(names(&scan.objects), ["a"]);
}

#[test]
fn objects_of_other_apis_are_kept_for_hub_side_checks() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("metrics.yaml"),
        "apiVersion: metrics.keptn.sh/v1\nkind: KeptnMetric\nmetadata: {name: edge-1-errors, namespace: keptn}\nstatus: {value: \"0.01\"}\n",
    )
    .unwrap();
    let scan = ManifestDir::new(dir.path()).scan();
    assert!(scan.errors.is_empty(), "{:?}", scan.errors);
    assert_eq!(scan.objects.hub_objects.len(), 1);
    assert_eq!(scan.objects.hub_objects[0]["kind"], "KeptnMetric");
}

#[test]
fn a_typo_refuses_the_file_naming_file_document_field_and_fix_and_keeps_the_last_good_version() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sets.yaml");
    let set = |failover: &str| {
        format!(
            "{}---\napiVersion: fleetpulse.io/v1alpha1\nkind: ClusterSet\nmetadata: {{name: prod}}\n\
             spec: {{maxReplicas: 1, failover: {{{failover}}}}}\n",
            cluster("a")
        )
    };
    fs::write(&file, set("tolerationSeconds: 600")).unwrap();
    let mut manifests = ManifestDir::new(dir.path());
    let first = manifests.scan();
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    assert!(manifests.unloaded().is_empty());
    // A typo, and a different size so the rescan sees the edit.
    fs::write(&file, set("tolerationSecond: 600, failback: false")).unwrap();
    let scan = manifests.scan();
    assert_eq!(scan.errors.len(), 1, "{:?}", scan.errors);
    let e = scan.errors[0].to_string();
    assert!(e.contains("sets.yaml (document 2)"), "{e}");
    assert!(
        e.contains(
            "spec.failover.tolerationSecond: unknown field; did you mean \"tolerationSeconds\"?"
        ),
        "{e}"
    );
    assert_eq!(
        scan.objects.cluster_sets[0]
            .spec
            .set
            .failover
            .toleration_seconds,
        600,
        "the previous version stays in effect"
    );
    assert_eq!(names(&scan.objects), ["a"]);
    assert!(
        manifests.unloaded().is_empty(),
        "it loaded once in this process"
    );
    assert!(manifests.scan().errors.is_empty(), "reported once per edit");
}

#[test]
fn a_file_that_never_loaded_in_this_process_is_listed_as_unloaded() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.yaml"), cluster("Not_A_Name")).unwrap();
    let mut manifests = ManifestDir::new(dir.path());
    let scan = manifests.scan();
    assert!(names(&scan.objects).is_empty());
    let unloaded = manifests.unloaded();
    assert_eq!(unloaded.len(), 1);
    assert!(
        unloaded[0].to_string().contains("metadata.name"),
        "{}",
        unloaded[0]
    );
}

#[test]
fn a_health_policy_whose_lua_does_not_compile_is_refused_when_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let policy = |condition: &str| {
        format!(
            "apiVersion: fleetpulse.io/v1alpha1\nkind: HealthPolicy\nmetadata: {{name: nodes, namespace: fleet}}\n\
             spec:\n  clusterSelector: {{matchLabels: {{env: prod}}}}\n  livenessChecks:\n    - name: all-nodes\n      \
             resourceSelectors: [{{group: \"\", version: v1, kind: Node}}]\n      condition: |\n        {condition}\n"
        )
    };
    let file = dir.path().join("policy.yaml");
    fs::write(
        &file,
        policy("function evaluate() return {pass = true} end"),
    )
    .unwrap();
    let mut manifests = ManifestDir::new(dir.path());
    assert!(manifests.scan().errors.is_empty());
    fs::write(
        &file,
        policy("function evaluate() return {pass = } end -- broken"),
    )
    .unwrap();
    let scan = manifests.scan();
    assert_eq!(scan.errors.len(), 1, "{:?}", scan.errors);
    let e = scan.errors[0].to_string();
    assert!(
        e.contains("policy.yaml (document 1)") && e.contains("HealthPolicy nodes"),
        "{e}"
    );
    assert!(e.contains("check `all-nodes`") && e.contains(":1:"), "{e}");
    assert_eq!(
        scan.objects.health_policies.len(),
        1,
        "the previous version stays in effect"
    );
}

use super::*;
use clap::{CommandFactory, Parser};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    mirrors: MirrorArgs,
}

fn cluster(labels: &[(&str, &str)], mirrors: Vec<MirrorRef>) -> MemberCluster {
    let mut mc = MemberCluster::new("edge-1", Default::default());
    mc.metadata.namespace = Some("fleet".into());
    mc.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    mc.spec.mirrors = mirrors;
    mc
}

#[test]
fn the_flags_parse_and_help_is_consistent() {
    Cli::command().debug_assert();
    let cli = Cli::try_parse_from([
        "hub",
        "--mirror-default",
        "sveltoscluster",
        "--mirror-default",
        "argocd-secret:namespace=argocd,name-label=argocd.example.com/secret",
        "--mirror-default",
        "karmada-cluster:taint-effect=NoExecute",
    ])
    .unwrap();
    let d = &cli.mirrors.mirror_defaults;
    assert_eq!(d.len(), 3);
    assert_eq!(d[1].namespace.as_deref(), Some("argocd"));
    assert_eq!(d[2].taint_effect, Some(MirrorTaintEffect::NoExecute));
    assert_eq!(cli.mirrors.resync(), Duration::from_secs(300));
}

#[test]
fn a_bad_default_is_refused_with_what_is_accepted() {
    for (bad, says) in [
        ("sveltos", "use one of sveltoscluster"),
        ("ocm-managedcluster:namespace=x", "cluster-scoped"),
        (
            "sveltoscluster:taint-effect=NoExecute",
            "karmada-cluster only",
        ),
        (
            "karmada-cluster:taint-effect=Evict",
            "use NoSchedule or NoExecute",
        ),
        ("capi-cluster:nmespace=x", "unknown option \"nmespace\""),
        ("capi-cluster:namespace", "is not OPTION=VALUE"),
    ] {
        let err = DefaultMirror::parse(bad).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn defaults_fill_in_kinds_the_cluster_does_not_list_and_a_missing_name_label_is_a_problem() {
    let args = MirrorArgs {
        mirror_defaults: vec![
            DefaultMirror::parse("sveltoscluster").unwrap(),
            DefaultMirror::parse("argocd-secret:namespace=argocd,name-label=argo").unwrap(),
        ],
        ..Default::default()
    };
    let (mirrors, problems) = args.mirrors_of(&cluster(&[("argo", "cluster-edge-1")], vec![]));
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(mirrors[0].kind, "SveltosCluster");
    assert_eq!(
        (mirrors[0].name.as_str(), mirrors[0].namespace.as_deref()),
        ("edge-1", None)
    );
    assert_eq!(
        (mirrors[1].name.as_str(), mirrors[1].namespace.as_deref()),
        ("cluster-edge-1", Some("argocd"))
    );
    let own = MirrorRef::new("lib.projectsveltos.io/v1beta1", "SveltosCluster", "other");
    let (mirrors, problems) = args.mirrors_of(&cluster(&[], vec![own.clone()]));
    assert_eq!(
        mirrors,
        [own],
        "the listed SveltosCluster overrides the default"
    );
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].contains("fleet/edge-1 has no label \"argo\"")
            && problems[0].contains("add the label"),
        "{}",
        problems[0]
    );
}

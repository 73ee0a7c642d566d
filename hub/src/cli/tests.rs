//! The command line's own rules: flags that conflict, and what the flags set.

use super::*;
use clap::CommandFactory;

#[test]
fn cli_is_well_formed() {
    Cli::command().debug_assert();
}

#[test]
fn plain_http_and_tls_flags_conflict() {
    let r = Cli::try_parse_from([
        "fleetpulse-hub",
        "serve",
        "--manifests",
        "m",
        "--data",
        "d",
        "--insecure-http",
        "--tls-cert",
        "c",
        "--tls-key",
        "k",
    ]);
    assert!(r.is_err());
}

fn serve(extra: &[&str]) -> HubOptions {
    let args = ["fleetpulse-hub", "serve", "--manifests", "m", "--data", "d"];
    let cli = Cli::try_parse_from(args.iter().chain(extra).copied()).expect("valid flags");
    match cli.command {
        Command::Serve(serve) => serve.options(),
        other => panic!("parsed {other:?}, not serve"),
    }
}

#[test]
fn heartbeat_signatures_are_batched_unless_turned_off() {
    assert_eq!(serve(&[]).batch_verify, Some(BatchSettings::default()));
    assert_eq!(serve(&["--batch-verify=false"]).batch_verify, None);
    let sized = serve(&["--batch-verify-max", "64", "--batch-verify-wait-ms", "25"]);
    assert_eq!(
        sized.batch_verify,
        Some(BatchSettings {
            max_batch: 64,
            max_wait: Duration::from_millis(25),
        })
    );
    let too_small = ["fleetpulse-hub", "serve", "--manifests", "m", "--data", "d"]
        .into_iter()
        .chain(["--batch-verify-max", "1"]);
    assert!(Cli::try_parse_from(too_small).is_err());
}

fn kube_serve(extra: &[&str]) -> Result<HubOptions, clap::Error> {
    let args = ["fleetpulse-hub", "serve", "--kube"];
    let cli = Cli::try_parse_from(args.iter().chain(extra).copied())?;
    match cli.command {
        Command::Serve(serve) => Ok(serve.options()),
        other => panic!("parsed {other:?}, not serve"),
    }
}

#[test]
fn shards_take_the_lease_flags_and_the_replicas_url() {
    let o = kube_serve(&[
        "--shards",
        "12",
        "--shard-url",
        "https://hub-1.hub.example.com:8443/",
        "--pod-name",
        "hub-1",
        "--pod-namespace",
        "fleetpulse-system",
        "--lease-duration-seconds",
        "9",
    ])
    .expect("valid flags");
    let s = o.shards.expect("sharded");
    assert_eq!(
        (s.shards, s.namespace.as_str(), s.identity.as_str()),
        (12, "fleetpulse-system", "hub-1")
    );
    assert_eq!(s.duration, Duration::from_secs(9));
    assert_eq!(s.url.as_deref(), Some("https://hub-1.hub.example.com:8443"));
    assert!(o.leader.is_none());
    assert!(kube_serve(&[]).expect("valid").shards.is_none());
}

#[test]
fn shards_refuse_leader_election_a_bad_url_and_a_count_out_of_range() {
    let err = |extra: &[&str]| kube_serve(extra).err().map(|e| e.to_string());
    assert!(err(&["--shards", "4", "--leader-elect"]).is_some());
    assert!(err(&["--shards", "0"]).is_some());
    assert!(err(&["--shards", "2000"]).is_some());
    let bad = err(&["--shards", "4", "--shard-url", "hub-1:8443"]).expect("refused");
    assert!(
        bad.contains("hub-1:8443") && bad.contains("e.g. https://"),
        "{bad}"
    );
    let query = err(&["--shards", "4", "--shard-url", "https://h:1/?x=1"]).expect("refused");
    assert!(query.contains("query"), "{query}");
    assert!(
        err(&["--shard-url", "https://h:1"]).is_some(),
        "a URL without --shards"
    );
    let no_kube = Cli::try_parse_from([
        "fleetpulse-hub",
        "serve",
        "--manifests",
        "m",
        "--data",
        "d",
        "--shards",
        "4",
    ]);
    assert!(no_kube.is_err(), "shards need Kubernetes mode");
    let leader_without_kube = Cli::try_parse_from([
        "fleetpulse-hub",
        "serve",
        "--manifests",
        "m",
        "--data",
        "d",
        "--leader-elect",
    ]);
    assert!(
        leader_without_kube.is_err(),
        "leader election needs Kubernetes mode"
    );
}

use super::*;
use clap::CommandFactory;

#[test]
fn cli_is_well_formed() {
    Cli::command().debug_assert();
}

#[test]
fn every_flag_has_an_environment_variable() {
    let cli = Cli::command();
    let mut commands = vec![&cli];
    commands.extend(cli.get_subcommands());
    for cmd in commands {
        for arg in cmd.get_arguments().filter(|a| a.get_long().is_some()) {
            if matches!(arg.get_id().as_str(), "help" | "version") {
                continue;
            }
            let env = arg
                .get_env()
                .unwrap_or_else(|| panic!("--{} has no env", arg.get_id()));
            assert!(env.to_str().unwrap().starts_with("FLEETPULSE_"), "{env:?}");
        }
    }
}

#[test]
fn run_flags_parse_with_their_defaults() {
    let cli = Cli::try_parse_from([
        "fleetpulse-agent",
        "run",
        "--hub",
        "https://hub.example",
        "--cluster",
        "fleet/edge-1",
        "--key-file",
        "/keys/agent.pem",
    ])
    .unwrap();
    let Command::Run(run) = cli.command else {
        panic!("not run")
    };
    assert_eq!(run.cluster, ClusterId::new("fleet", "edge-1"));
    assert_eq!(
        (run.audience.as_str(), run.interval_seconds),
        ("fleetpulse", 10)
    );
    assert!(!run.insecure_http && run.hub_ca.is_none() && run.cluster_uid.is_empty());
}

#[test]
fn malformed_cluster_and_zero_interval_are_refused_by_the_parser() {
    let base = [
        "fleetpulse-agent",
        "run",
        "--hub",
        "https://h",
        "--key-file",
        "k",
    ];
    let with = |extra: &[&str]| Cli::try_parse_from(base.iter().chain(extra)).map(|_| ());
    assert!(with(&["--cluster", "no-namespace"]).is_err());
    assert!(with(&["--cluster", "a/b", "--interval-seconds", "0"]).is_err());
    assert!(with(&["--cluster", "a/b"]).is_ok());
}

#[test]
fn http_hub_is_refused_without_insecure_http() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("agent.pem");
    keys::generate_key_file(&key_file, false).unwrap();
    let args = |insecure: bool| RunArgs {
        hub: Url::parse("http://hub.example").unwrap(),
        cluster: ClusterId::new("fleet", "edge-1"),
        key_file: Some(key_file.clone()),
        key_secret: "fleetpulse-agent-key".into(),
        agent_namespace: "fleetpulse-system".into(),
        hub_ca: None,
        bootstrap_token: None,
        hub_ca_hash: None,
        audience: DEFAULT_AUDIENCE.into(),
        cluster_uid: String::new(),
        interval_seconds: 10,
        insecure_http: insecure,
        kubeconfig: None,
        lua_deadline_ms: 250,
        lua_memory_mib: 32,
        checks_namespace: "fleetpulse-system".into(),
        listen: None,
        rotate_key_every: crate::rotation::DEFAULT_EVERY,
    };
    let err = args(false).into_options(None).unwrap_err();
    assert!(err.to_string().contains("--insecure-http"), "{err}");
    assert!(args(true).into_options(None).unwrap().allow_insecure_http);
}

#[test]
fn listen_takes_an_address_and_is_off_by_default() {
    let base = [
        "fleetpulse-agent",
        "run",
        "--hub",
        "https://h",
        "--cluster",
        "f/e",
    ];
    let run = |extra: &[&str]| match Cli::try_parse_from(base.iter().chain(extra))
        .unwrap()
        .command
    {
        Command::Run(args) => args.listen,
        _ => unreachable!("parsed as run"),
    };
    assert_eq!(run(&[]), None);
    assert_eq!(
        run(&["--listen", "[::]:9090"]),
        Some("[::]:9090".parse().unwrap())
    );
    assert!(Cli::try_parse_from(base.iter().chain(&["--listen", "9090"])).is_err());
}

#[test]
fn pubkey_takes_a_key_file_or_a_secret_with_a_kubeconfig() {
    let parse = |args: &[&str]| {
        Cli::try_parse_from(["fleetpulse-agent", "pubkey"].iter().chain(args)).map(|_| ())
    };
    assert!(parse(&["--key-file", "k.pem", "--yaml"]).is_ok());
    assert!(parse(&["--from-secret", "ns/name", "--kubeconfig", "kc"]).is_ok());
    assert!(parse(&[]).is_err());
    assert!(parse(&["--key-file", "k.pem", "--from-secret", "ns/name"]).is_err());
}

#[test]
fn rotate_key_every_takes_days_hours_or_zero_and_defaults_to_thirty_days() {
    let parse = |extra: &[&str]| {
        let mut argv = vec![
            "fleetpulse-agent",
            "run",
            "--hub",
            "https://hub.example",
            "--cluster",
            "fleet/a",
        ];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv)
    };
    let every = |extra: &[&str]| match parse(extra).unwrap().command {
        Command::Run(args) => args.rotate_key_every,
        _ => unreachable!("parsed as run"),
    };
    assert_eq!(every(&[]), crate::rotation::DEFAULT_EVERY);
    assert_eq!(
        every(&["--rotate-key-every", "7d"]),
        Duration::from_secs(7 * 86_400)
    );
    assert_eq!(
        every(&["--rotate-key-every", "12h"]),
        Duration::from_secs(12 * 3600)
    );
    assert_eq!(every(&["--rotate-key-every", "0"]), Duration::ZERO);
    let err = parse(&["--rotate-key-every", "soon"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("30d"), "{err}");
}

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

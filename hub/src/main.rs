//! `fleetpulse-hub`: see `fleetpulse-hub --help`. A failure is printed as one line (every
//! cause and the backtrace with `-v`).
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = fleetpulse_hub::cli::Cli::parse();
    let verbose = cli.verbose;
    fleetpulse_common::cli::exit_code(fleetpulse_hub::cli::run(cli).await, verbose)
}

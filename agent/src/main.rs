//! The `fleetpulse-agent` binary: parses the command line and hands over to the library;
//! a failure is printed as one line (every cause and the backtrace with `-v`).

use std::process::ExitCode;

use clap::Parser;
use fleetpulse_agent::cli::{self, Cli};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let verbose = cli.verbose;
    fleetpulse_common::cli::exit_code(cli::main(cli).await, verbose)
}

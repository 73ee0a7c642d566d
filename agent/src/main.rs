//! The `fleetpulse-agent` binary: parses the command line and hands over to the library.

use clap::Parser;
use fleetpulse_agent::cli::{self, Cli};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    cli::main(Cli::parse()).await
}

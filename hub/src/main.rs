//! `fleetpulse-hub`: see `fleetpulse-hub --help`.
#![forbid(unsafe_code)]

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    fleetpulse_hub::cli::run(fleetpulse_hub::cli::Cli::parse()).await
}

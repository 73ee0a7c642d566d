//! `fleetpulse-hub`: see `fleetpulse-hub --help`. A failure is printed as one line (every
//! cause and the backtrace with `-v`).
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

/// jemalloc, not the system's malloc: a hub loads its whole fleet at once, and glibc kept
/// the memory that load freed (about 4 MiB per 1,000 clusters) between what it kept, while
/// jemalloc returns it; see docs/performance.md.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = fleetpulse_hub::cli::Cli::parse();
    let verbose = cli.verbose;
    fleetpulse_common::cli::exit_code(fleetpulse_hub::cli::run(cli).await, verbose)
}

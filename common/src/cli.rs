//! What both binaries' command lines share, so the hub and the agent behave alike: logs to
//! stderr in one shape (text, or JSON lines with the same keys: `timestamp`, `level`,
//! `target`, `message` and the event's fields, flattened), colour only on a terminal, and
//! errors printed as one line (`error: what failed: why`) unless `-v` asks for every cause
//! and the backtrace.

use std::io::IsTerminal;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable text (coloured only when stderr is a terminal).
    #[default]
    Text,
    /// One JSON object per line, for log collectors; never coloured.
    Json,
}

/// Installs the global subscriber writing to stderr with `filter` (env-filter syntax, e.g.
/// `info` or `fleetpulse_hub=debug`).
pub fn init_logging(format: LogFormat, filter: &str) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(filter)
        .map_err(|e| anyhow::anyhow!("log filter {filter:?} is not a valid filter: {e}"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("cannot install the logger: {e}"))
}

/// Writes `text` to stdout. A reader that stopped reading (`| head`) is not an error, and
/// nothing panics on a closed stdout.
pub fn print(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("cannot write to stdout"))
        }
        _ => Ok(()),
    }
}

/// The process's exit status for `result`, printing a failure to stderr: one line with
/// every cause (`error: cannot read kubeconfig k.yaml: No such file or directory`), or with
/// `verbose` each cause on its own line and, when `RUST_BACKTRACE=1` is set, where the
/// error arose.
pub fn exit_code(result: anyhow::Result<()>, verbose: bool) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", render(&e, verbose));
            ExitCode::FAILURE
        }
    }
}

fn render(e: &anyhow::Error, verbose: bool) -> String {
    if verbose {
        format!("error: {e:?}")
    } else {
        format!("error: {e:#}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_one_line_with_its_causes_unless_verbose() {
        let e = anyhow::anyhow!("No such file or directory").context("cannot read kubeconfig k");
        assert_eq!(
            render(&e, false),
            "error: cannot read kubeconfig k: No such file or directory"
        );
        let verbose = render(&e, true);
        assert!(verbose.contains("Caused by:"), "{verbose}");
    }
}

//! The real `fleetpulse-hub` and `fleetpulse-agent` binaries as child processes, found next
//! to the test executable (cargo builds every workspace binary before `cargo test
//! --workspace` runs a test), and killed when their guard is dropped.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

/// Path of a workspace binary in the same target directory as the running test (one
/// directory up from `target/<profile>/deps`) or tool (beside it).
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    (exe.ancestors().skip(1).take(2))
        .map(|dir| dir.join(&file))
        .find(|p| p.exists())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{file} is not built next to {}; run the tests with `cargo test --workspace` (or `cargo build --workspace` first)",
                exe.display()
            )
        })
}

/// What `fleetpulse-hub token create` printed: the token and the CA hash to pin.
pub fn token_and_ca_hash(out: &str) -> anyhow::Result<(String, String)> {
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
            .ok_or_else(|| anyhow::anyhow!("token create printed no {name} {out}"))
    };
    Ok((field("token:")?, field("ca hash:")?))
}

/// Runs a binary to completion and returns its output; fails on a non-zero exit.
pub fn run(name: &str, args: &[&str]) -> anyhow::Result<Output> {
    let out = Command::new(binary(name)?)
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{name} {args:?} failed with {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out)
}

/// A running child process, killed on drop.
pub struct Running {
    /// The child.
    pub child: Child,
    name: String,
    /// Captured stderr lines, for [`Running::spawn_logged`] processes.
    log: Option<Arc<Mutex<Vec<String>>>>,
}

/// Most stderr lines a [`Running::spawn_logged`] process keeps (older ones are dropped).
const LOG_LINES_KEPT: usize = 20_000;

impl Running {
    /// Starts a binary with output going to the test's stderr (shown on failure).
    pub fn spawn(name: &str, args: &[&str]) -> anyhow::Result<Running> {
        let child = Command::new(binary(name)?)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .env("NO_COLOR", "1")
            .spawn()?;
        Ok(Running {
            child,
            name: name.to_owned(),
            log: None,
        })
    }

    /// Starts a binary with its stderr captured: a thread echoes every line to the test's
    /// stderr as `[label] line` (shown when the test fails) and keeps it for
    /// [`Running::log_line`], e.g. to read the address a server printed.
    pub fn spawn_logged(name: &str, label: &str, args: &[&str]) -> anyhow::Result<Running> {
        let mut child = Command::new(binary(name)?)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env("NO_COLOR", "1")
            .spawn()?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (lines, label) = (log.clone(), label.to_owned());
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let line = strip_ansi(&line);
                eprintln!("[{label}] {line}");
                let mut lines = lines.lock().unwrap_or_else(|e| e.into_inner());
                if lines.len() >= LOG_LINES_KEPT {
                    lines.remove(0);
                }
                lines.push(line);
            }
        });
        Ok(Running {
            child,
            name: name.to_owned(),
            log: Some(log),
        })
    }

    /// The first captured stderr line containing `needle` (only for
    /// [`Running::spawn_logged`] processes; colours removed).
    pub fn log_line(&self, needle: &str) -> Option<String> {
        let log = self.log.as_ref()?;
        let lines = log.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().find(|l| l.contains(needle)).cloned()
    }

    /// How many captured stderr lines contain `needle` (only for
    /// [`Running::spawn_logged`] processes).
    pub fn log_count(&self, needle: &str) -> usize {
        let Some(log) = self.log.as_ref() else {
            return 0;
        };
        let lines = log.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().filter(|l| l.contains(needle)).count()
    }

    /// The `addr=` field of the first captured stderr line containing `needle`: where a
    /// server started on port 0 really listens (no bind-then-drop port race).
    pub fn logged_addr(&self, needle: &str) -> Option<std::net::SocketAddr> {
        addr_field(&self.log_line(needle)?)
    }

    /// Sends a signal by name with the `kill` command, e.g. `STOP` (freeze the process, as
    /// a partition or a hung node would), `CONT` (resume it) or `KILL`.
    pub fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args([format!("-{signal}").as_str(), &pid])
            .status()?;
        anyhow::ensure!(
            sent.success(),
            "could not send SIG{signal} to {} ({pid})",
            self.name
        );
        Ok(())
    }

    /// The exit status if the process has ended (it is reaped), else `None`.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends SIGTERM (a graceful stop) and returns whether the process exited successfully
    /// within `timeout`.
    pub fn terminate(&mut self, timeout: std::time::Duration) -> anyhow::Result<bool> {
        Ok(terminate_child(&mut self.child, &self.name, timeout)?.success())
    }
}

/// `line` without ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends SIGTERM (a graceful stop) to `child` (`name` in messages) and waits up to
/// `timeout` for it to exit; its exit status, or an error if it is still running.
pub fn terminate_child(
    child: &mut std::process::Child,
    name: &str,
    timeout: std::time::Duration,
) -> anyhow::Result<std::process::ExitStatus> {
    let pid = child.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status()?;
    anyhow::ensure!(sent.success(), "could not signal {name} ({pid})");
    let mut status = None;
    crate::wait::blocking_until(&format!("{name} to exit"), timeout, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    })?;
    status.ok_or_else(|| anyhow::anyhow!("{name} ({pid}) did not exit"))
}

/// The socket address in the `addr=` field of a log line, as the hub logs `listening` and
/// `hub serving`.
pub fn addr_field(line: &str) -> Option<std::net::SocketAddr> {
    line.split_whitespace()
        .find_map(|field| field.strip_prefix("addr="))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ansi_colours_are_removed_from_captured_lines() {
        let coloured = "\u{1b}[2m2025\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m hub serving \u{1b}[3maddr\u{1b}[0m\u{1b}[2m=\u{1b}[0m127.0.0.1:1";
        assert_eq!(
            super::strip_ansi(coloured),
            "2025  INFO hub serving addr=127.0.0.1:1"
        );
    }

    #[test]
    fn the_address_is_read_from_the_addr_field() {
        let line = "2025  INFO fleetpulse_hub::server: listening addr=127.0.0.1:40123 tls=true";
        assert_eq!(super::addr_field(line), "127.0.0.1:40123".parse().ok());
        assert_eq!(super::addr_field("hub serving tls=true"), None);
    }
}

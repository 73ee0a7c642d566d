//! The real `fleetpulse-hub` and `fleetpulse-agent` binaries as child processes, found next
//! to the test executable (cargo builds every workspace binary before `cargo test
//! --workspace` runs a test), and killed when their guard is dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

/// Path of a workspace binary in the same target directory as the running test.
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .ok_or_else(|| anyhow::anyhow!("no target dir"))?;
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    anyhow::ensure!(
        path.exists(),
        "{} is not built; run the tests with `cargo test --workspace` (or `cargo build --workspace` first)",
        path.display()
    );
    Ok(path)
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
}

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
        })
    }

    /// Sends SIGTERM (a graceful stop) and returns whether the process exited successfully
    /// within `timeout`.
    pub fn terminate(&mut self, timeout: std::time::Duration) -> anyhow::Result<bool> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status()?;
        anyhow::ensure!(sent.success(), "could not signal {} ({pid})", self.name);
        let mut status = None;
        crate::wait::blocking_until(&format!("{} to exit", self.name), timeout, || {
            status = self.child.try_wait().ok().flatten();
            status.is_some()
        })?;
        Ok(status.is_some_and(|s| s.success()))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

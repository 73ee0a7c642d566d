//! Shutdown on SIGTERM (what Kubernetes sends) or Ctrl-C.

use tokio_util::sync::CancellationToken;

/// Cancels `shutdown` on the first SIGTERM or Ctrl-C. Fails only if the signal handlers
/// cannot be installed.
pub fn cancel_on_signal(shutdown: CancellationToken) -> std::io::Result<()> {
    #[cfg(unix)]
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::spawn(async move {
        #[cfg(unix)]
        let terminated = sigterm.recv();
        #[cfg(not(unix))]
        let terminated = std::future::pending::<Option<()>>();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C received; stopping"),
            _ = terminated => tracing::info!("SIGTERM received; stopping"),
        }
        shutdown.cancel();
    });
    Ok(())
}

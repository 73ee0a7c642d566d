//! The TCP probe, as the kubelet's `tcpSocket` behaves: it passes when a connection opens
//! within the timeout, and closes the connection at once without sending anything.

use std::time::Duration;

use fleetpulse_common::api::check::TcpProbe;
use tokio::net::TcpStream;

use super::target::{display_address, tcp_address};
use super::{describe_error, format_timeout};
use crate::checks::RunOutcome;

/// Runs one TCP probe: connects to `host:port` or to the Service's DNS name and port. A
/// spec that cannot be run is a failing outcome naming the field to fix.
pub async fn run_tcp(probe: &TcpProbe, timeout: Duration) -> RunOutcome {
    let (host, port) = match tcp_address(probe) {
        Ok(address) => address,
        Err(error) => return RunOutcome::fail(format!("invalid tcp probe: {error}")),
    };
    let address = display_address(&host, port);
    let outcome =
        match tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), port))).await {
            Ok(Ok(stream)) => {
                drop(stream);
                RunOutcome::pass(format!("connected to {address}"))
            }
            Ok(Err(error)) => {
                RunOutcome::fail(format!("connect to {address}: {}", describe_error(&error)))
            }
            Err(_elapsed) => RunOutcome::fail(format!(
                "connect to {address}: timed out after {}",
                format_timeout(timeout)
            )),
        };
    tracing::debug!(
        %address,
        passing = outcome.passing,
        message = %outcome.message,
        "tcp probe ran"
    );
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(5);

    fn probe(port: u16) -> TcpProbe {
        TcpProbe {
            host: Some("127.0.0.1".into()),
            port: Some(port),
            ..TcpProbe::default()
        }
    }

    #[tokio::test]
    async fn open_port_passes() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let outcome = run_tcp(&probe(port), TIMEOUT).await;
        assert!(outcome.passing, "{}", outcome.message);
        assert_eq!(outcome.message, format!("connected to 127.0.0.1:{port}"));
    }

    #[tokio::test]
    async fn closed_port_fails_with_connection_refused() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let outcome = run_tcp(&probe(port), TIMEOUT).await;
        assert!(!outcome.passing);
        assert_eq!(
            outcome.message,
            format!("connect to 127.0.0.1:{port}: connection refused")
        );
    }

    #[tokio::test]
    async fn missing_port_is_a_failing_outcome_naming_the_field() {
        let spec = TcpProbe {
            host: Some("127.0.0.1".into()),
            ..TcpProbe::default()
        };
        let outcome = run_tcp(&spec, TIMEOUT).await;
        assert!(!outcome.passing);
        assert!(
            outcome.message.contains("`tcp.port`"),
            "{}",
            outcome.message
        );
    }
}

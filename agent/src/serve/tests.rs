use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fleetpulse_common::protocol::report::{CheckResult, ClusterId};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Endpoint, READY_INTERVALS, readiness, serve};
use crate::checks::ChecksSource;
use crate::metrics::AgentMetrics;
use crate::runner::AgentStatus;

const INTERVAL: Duration = Duration::from_secs(10);

#[test]
fn ready_only_while_the_hub_accepted_a_heartbeat_within_three_intervals() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let err = readiness(None, INTERVAL, now).unwrap_err();
    assert!(err.contains("not accepted a heartbeat yet"), "{err}");
    let recent = now - INTERVAL * READY_INTERVALS;
    assert!(readiness(Some(recent), INTERVAL, now).is_ok());
    let old = recent - Duration::from_secs(1);
    let err = readiness(Some(old), INTERVAL, now).unwrap_err();
    assert!(err.contains("no heartbeat accepted for 31s"), "{err}");
}

struct Fixed(Vec<CheckResult>);

impl ChecksSource for Fixed {
    fn results(&self) -> Vec<CheckResult> {
        self.0.clone()
    }
}

/// A plain HTTP/1.1 GET, as the kubelet's probe sends it: the status and the body.
async fn get(addr: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, body.to_owned())
}

#[tokio::test]
async fn the_endpoint_answers_probes_and_metrics_and_healthz_fails_once_the_loop_ended() {
    let status = AgentStatus::starting(ClusterId::new("fleet", "edge"), 1, INTERVAL);
    let (sender, receiver) = watch::channel(status);
    let metrics = AgentMetrics::default();
    let endpoint = Endpoint {
        status: receiver,
        checks: Arc::new(Fixed(Vec::new())),
        metrics: metrics.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = listener.local_addr().unwrap().to_string();
    let shutdown = CancellationToken::new();
    let served = tokio::spawn(serve(listener, endpoint, shutdown.clone()));

    assert_eq!(get(&base, "/healthz").await.0, 200);
    let (code, body) = get(&base, "/readyz").await;
    assert_eq!(
        (code, body.as_str()),
        (503, "not ready: the hub has not accepted a heartbeat yet\n")
    );
    metrics.heartbeat(Ok(()), Duration::from_millis(20), SystemTime::now());
    let (code, body) = get(&base, "/readyz").await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = get(&base, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        body.contains("fleetpulse_agent_heartbeats_sent_total 1"),
        "{body}"
    );

    drop(sender);
    let (code, body) = get(&base, "/healthz").await;
    assert_eq!(
        (code, body.as_str()),
        (503, "the heartbeat loop has ended\n")
    );
    shutdown.cancel();
    served.await.unwrap().unwrap();
}

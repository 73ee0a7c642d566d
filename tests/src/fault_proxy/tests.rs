//! The proxy against a loopback echo server.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// An echo server on loopback.
async fn echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

async fn round_trip(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
    s.write_all(msg).await?;
    let mut got = vec![0u8; msg.len()];
    s.read_exact(&mut got).await?;
    Ok(got)
}

#[tokio::test]
async fn delay_applies_per_direction_and_jitter_keeps_the_byte_order() {
    let proxy = FaultProxy::start(echo().await).await.unwrap();
    proxy.set(
        Direction::ToUpstream,
        Faults::jittery(Duration::from_millis(100), Duration::from_millis(50), 0.0),
    );
    proxy.set(
        Direction::ToClient,
        Faults::jittery(Duration::from_millis(100), Duration::ZERO, 0.0),
    );
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    let start = Instant::now();
    assert_eq!(round_trip(&mut s, b"ping").await.unwrap(), b"ping");
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "{:?}",
        start.elapsed()
    );
    let sent: Vec<u8> = (0..200u8).collect();
    for chunk in sent.chunks(10) {
        s.write_all(chunk).await.unwrap();
    }
    let mut got = vec![0u8; sent.len()];
    s.read_exact(&mut got).await.unwrap();
    assert_eq!(got, sent);
}

#[tokio::test]
async fn a_blackhole_answers_nothing_and_switching_it_off_lets_new_traffic_through() {
    let proxy = FaultProxy::start(echo().await).await.unwrap();
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut s, b"a").await.unwrap(), b"a");
    proxy.set(Direction::ToUpstream, Faults::blackhole());
    let silent = tokio::time::timeout(Duration::from_millis(500), round_trip(&mut s, b"b")).await;
    assert!(silent.is_err(), "nothing comes back through a blackhole");
    assert!(proxy.counters().blackholed.load(Ordering::Relaxed) >= 1);
    proxy.set(Direction::ToUpstream, Faults::none());
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut s, b"c").await.unwrap(), b"c");
}

#[tokio::test]
async fn a_wedged_connection_stays_silent_while_a_new_one_is_served() {
    let proxy = FaultProxy::start(echo().await).await.unwrap();
    let mut old = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut old, b"a").await.unwrap(), b"a");
    proxy.wedge_open_connections();
    let mut new = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut new, b"b").await.unwrap(), b"b");
    let silent = tokio::time::timeout(Duration::from_millis(500), round_trip(&mut old, b"c")).await;
    assert!(
        silent.is_err(),
        "the connection open at the wedge answers nothing"
    );
    assert_eq!(round_trip(&mut new, b"d").await.unwrap(), b"d");
}

#[tokio::test]
async fn reset_and_drop_fail_the_connection_and_count_it() {
    let proxy = FaultProxy::start(echo().await).await.unwrap();
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut s, b"a").await.unwrap(), b"a");
    proxy.set(
        Direction::ToUpstream,
        Faults::jittery(Duration::ZERO, Duration::ZERO, 1.0),
    );
    assert!(round_trip(&mut s, b"b").await.is_err());
    proxy.set(
        Direction::ToClient,
        Faults {
            reset: true,
            ..Faults::none()
        },
    );
    proxy.set(Direction::ToUpstream, Faults::none());
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    assert!(round_trip(&mut s, b"c").await.is_err());
    assert_eq!(proxy.counters().resets.load(Ordering::Relaxed), 2);
    assert_eq!(proxy.connections(), 2);
}

#[tokio::test]
async fn only_loopback_upstreams_are_accepted() {
    let e = FaultProxy::start("192.0.2.1:443".parse().unwrap())
        .await
        .err()
        .expect("a non-loopback upstream is refused");
    assert!(e.to_string().contains("only forwards to loopback"), "{e}");
}

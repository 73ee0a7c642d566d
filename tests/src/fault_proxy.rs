//! A fault-injecting TCP proxy for loopback tests (the kernels here have no netem): it
//! forwards every connection to one upstream and, per direction and switchable while it
//! runs ([`FaultProxy::set`]), delays chunks with jitter (keeping their order), drops a
//! share of them by resetting the connection that carries them (the request in flight
//! fails), blackholes traffic (read and discarded, connections held open, so requests
//! time out), or resets every connection. [`FaultProxy::wedge_open_connections`]
//! blackholes only the connections open at that moment, for good, while new ones pass (a
//! NAT entry or load-balancer path that died silently under a kept connection).
//!
//! Loopback only: it listens on 127.0.0.1 and refuses a non-loopback upstream. Bounded:
//! at most [`MAX_CONNECTIONS`] at once, and at most [`QUEUED_CHUNKS`] chunks of 16 KiB
//! queued per direction of a connection (reading stops while the queue is full).
//!
//! [`scenario`] runs the real hub and agent binaries through proxies; [`soak`] keeps them
//! there for a while.

mod pump;
pub mod scenario;
pub mod soak;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Most connections open at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 256;
/// Chunks queued per direction of one connection.
pub const QUEUED_CHUNKS: usize = 64;

/// What happens to traffic in one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Faults {
    /// Added to every chunk's delivery.
    pub delay: Duration,
    /// Each chunk's delay varies uniformly by up to this much either way (never below 0).
    pub jitter: Duration,
    /// Share of chunks (0 to 1) whose connection is reset instead of forwarding them,
    /// spread evenly from a random start: one in every `1 / drop` chunks of a connection
    /// (the first within that many), so a short run fails its share for certain instead
    /// of by luck.
    pub drop: f64,
    /// Discard everything and answer nothing.
    pub blackhole: bool,
    /// Reset every connection as soon as it carries data, and new ones at once.
    pub reset: bool,
}

impl Faults {
    /// No fault.
    pub fn none() -> Self {
        Self::default()
    }

    /// Delay with jitter and a share of dropped chunks.
    pub fn jittery(delay: Duration, jitter: Duration, drop: f64) -> Self {
        Self {
            delay,
            jitter,
            drop,
            ..Self::default()
        }
    }

    /// A blackhole.
    pub fn blackhole() -> Self {
        Self {
            blackhole: true,
            ..Self::default()
        }
    }
}

/// A direction of traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the client (the agent) to the upstream (the hub).
    ToUpstream,
    /// From the upstream back to the client.
    ToClient,
}

/// What the proxy has seen so far.
#[derive(Debug, Default)]
pub struct Counters {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Chunks forwarded, both directions.
    pub forwarded: AtomicU64,
    /// Connections reset by `drop` or `reset`.
    pub resets: AtomicU64,
    /// Chunks discarded by a blackhole.
    pub blackholed: AtomicU64,
}

/// A proxy that cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The upstream is not a loopback address.
    #[error("the fault proxy only forwards to loopback; {0} is not (use 127.0.0.1 or ::1)")]
    NotLoopback(SocketAddr),
    /// Binding the listener failed.
    #[error("the fault proxy cannot listen on 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
}

/// A running proxy; stops (and drops its connections) when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    faults: [watch::Sender<Faults>; 2],
    /// Connections numbered below this are wedged (numbered from 0 as accepted).
    wedged_below: watch::Sender<u64>,
    counters: Arc<Counters>,
    stop: CancellationToken,
}

impl FaultProxy {
    /// Starts a proxy on 127.0.0.1 (a free port) to `upstream`, with no faults.
    pub async fn start(upstream: SocketAddr) -> Result<Self, ProxyError> {
        if !upstream.ip().is_loopback() {
            return Err(ProxyError::NotLoopback(upstream));
        }
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(ProxyError::Bind)?;
        let addr = listener.local_addr().map_err(ProxyError::Bind)?;
        let faults = [
            watch::channel(Faults::none()).0,
            watch::channel(Faults::none()).0,
        ];
        let counters = Arc::new(Counters::default());
        let stop = CancellationToken::new();
        let receivers = [faults[0].subscribe(), faults[1].subscribe()];
        let wedged_below = watch::channel(0).0;
        tokio::spawn(accept_loop(
            listener,
            upstream,
            (receivers, wedged_below.subscribe()),
            counters.clone(),
            stop.clone(),
        ));
        Ok(Self {
            addr,
            faults,
            wedged_below,
            counters,
            stop,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Switches the faults of one direction, for the chunks read from now on.
    pub fn set(&self, direction: Direction, faults: Faults) {
        self.faults[direction as usize].send_replace(faults);
    }

    /// Switches both directions to the same faults.
    pub fn set_both(&self, faults: Faults) {
        self.set(Direction::ToUpstream, faults);
        self.set(Direction::ToClient, faults);
    }

    /// Blackholes, both ways and for good, every connection open now; connections
    /// accepted later are served as the faults say.
    pub fn wedge_open_connections(&self) {
        self.wedged_below.send_replace(self.connections());
    }

    /// What the proxy has seen.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.counters.connections.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    (faults, wedged_below): ([watch::Receiver<Faults>; 2], watch::Receiver<u64>),
    counters: Arc<Counters>,
    stop: CancellationToken,
) {
    let open = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else { continue };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            continue;
        };
        let number = counters.connections.fetch_add(1, Ordering::Relaxed);
        let wedge = pump::Wedge {
            number,
            below: wedged_below.clone(),
        };
        let (faults, counters, stop) = (faults.clone(), counters.clone(), stop.clone());
        tokio::spawn(async move {
            let _permit = permit;
            if faults.iter().any(|f| f.borrow().reset) {
                pump::reset(client);
                counters.resets.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let Ok(server) = TcpStream::connect(upstream).await else {
                return;
            };
            stop.run_until_cancelled(pump::connection(client, server, faults, wedge, counters))
                .await;
        });
    }
}

#[cfg(test)]
mod tests;

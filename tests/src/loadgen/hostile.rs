//! Hostile traffic beside the fleet's heartbeats (`--slow-connections`,
//! `--bad-signature-burst`): connections that hold a slot as long as the hub lets them, and
//! bursts of reports whose signature does not verify. The fleet's latency and the hub's log
//! growth under it are what the run reports.
//!
//! Slow connections come in three kinds, a third each, reopened as soon as the hub closes
//! one, so `n` stay open (or in the hub's accept queue) the whole run:
//! - idle: a TCP connection that never starts its TLS handshake;
//! - slow headers: TLS, then a request line and headers dripped a byte a second;
//! - slow body: TLS, complete headers announcing a 4,000-byte body (within the size limit,
//!   so the hub waits for it), dripped a byte a second.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

use fleetpulse_agent::checks::probe::tls::{Verification, client_config};
use fleetpulse_common::protocol::CONTENT_TYPE_JOSE;

/// What the hostile traffic did.
#[derive(Debug, Default)]
pub struct HostileCounts {
    /// Slow connections opened (the first `n` and every reopening).
    pub slow_opened: AtomicU64,
    /// Slow connections the hub closed, by kind (idle, slow headers, slow body) and how:
    /// `closed` (the hub hung up) or the error that ended it.
    pub slow_closed: Mutex<BTreeMap<String, u64>>,
    /// Bad-signature reports sent.
    pub bad_sent: AtomicU64,
    /// Their answers, by status (`error` when none came).
    pub bad_statuses: Mutex<BTreeMap<String, u64>>,
}

/// Where and how hard to push.
#[derive(Clone, Debug)]
pub struct Hostile {
    /// `host:port` of the hub.
    pub addr: String,
    /// The hub's base URL.
    pub url: reqwest::Url,
    /// PEM of the hub's CA.
    pub ca_pem: String,
    /// Slow connections held open.
    pub slow_connections: usize,
    /// Bad-signature reports per burst.
    pub burst: usize,
    /// Seconds between the starts of bursts.
    pub burst_every: Duration,
    /// The loopback address the bursts come from (the fleet's is 127.0.0.1), so the hub's
    /// per-source limit on authentication failures cuts them off, not the fleet.
    pub burst_from: std::net::Ipv4Addr,
    /// The heartbeat path the bad reports go to, and a report whose signature is spoiled.
    pub path: String,
    /// A valid report, spoiled here before sending.
    pub report: String,
}

/// `report` with one character of its signature changed, so it no longer verifies.
pub fn spoil_signature(report: &str) -> String {
    let mut bytes = report.as_bytes().to_vec();
    let at = bytes.len() - 20;
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).expect("a JWS is ASCII")
}

impl Hostile {
    /// Starts every slow connection and the bursts; they run until `stop`.
    pub fn start(self, stop: CancellationToken) -> anyhow::Result<Arc<HostileCounts>> {
        let counts = Arc::new(HostileCounts::default());
        let config = client_config(Verification::CaBundle(&self.ca_pem))?;
        let connector = TlsConnector::from(Arc::new(config));
        let this = Arc::new(self);
        for i in 0..this.slow_connections {
            let (this, counts, stop) = (this.clone(), counts.clone(), stop.clone());
            let connector = connector.clone();
            tokio::spawn(async move { this.slow(i % 3, connector, &counts, stop).await });
        }
        if this.burst > 0 {
            let (counts, stop) = (counts.clone(), stop.clone());
            tokio::spawn(async move { this.bursts(&counts, stop).await });
        }
        Ok(counts)
    }

    /// One slow connection of `kind`, reopened whenever the hub closes it.
    async fn slow(
        &self,
        kind: usize,
        connector: TlsConnector,
        counts: &HostileCounts,
        stop: CancellationToken,
    ) {
        while !stop.is_cancelled() {
            counts.slow_opened.fetch_add(1, Ordering::Relaxed);
            // Closed by the hub, or refused: either way the slot is free again.
            let ended = tokio::select! {
                _ = stop.cancelled() => return,
                ended = self.hold(kind, &connector) => ended,
            };
            let how = match ended {
                Ok(()) => "closed".to_owned(),
                Err(e) => e.to_string().chars().take(60).collect(),
            };
            let key = format!("{} {how}", ["idle", "slow headers", "slow body"][kind]);
            {
                let mut closed = counts
                    .slow_closed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                *closed.entry(key).or_default() += 1;
            }
            // Not a busy loop when the hub refuses at once.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Holds one connection until the hub closes it.
    async fn hold(&self, kind: usize, connector: &TlsConnector) -> anyhow::Result<()> {
        let tcp = TcpStream::connect(&self.addr).await?;
        if kind == 0 {
            let mut tcp = tcp;
            let mut buf = [0u8; 64];
            while tcp.read(&mut buf).await? > 0 {}
            return Ok(());
        }
        let name = ServerName::try_from("localhost")?;
        let mut tls = connector.connect(name, tcp).await?;
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {CONTENT_TYPE_JOSE}\r\n",
            self.path
        );
        let (start, drip): (Vec<u8>, u8) = match kind {
            1 => (b"POST ".to_vec(), b'x'),
            _ => (
                format!("{head}Content-Length: 4000\r\n\r\n").into_bytes(),
                b'a',
            ),
        };
        tls.write_all(&start).await?;
        tls.flush().await?;
        let mut buf = [0u8; 512];
        loop {
            tokio::select! {
                read = tls.read(&mut buf) => {
                    if read? == 0 {
                        return Ok(());
                    }
                }
                _ = tokio::time::sleep(Duration::from_secs(1)) => {
                    tls.write_all(&[drip]).await?;
                    tls.flush().await?;
                }
            }
        }
    }

    /// Every `burst_every`, `burst` bad-signature reports, 32 at a time, each on a client
    /// of its own pool (HTTP/1.1, as a script would).
    async fn bursts(&self, counts: &HostileCounts, stop: CancellationToken) {
        let Ok(client) = super::client::client_from(
            self.ca_pem.as_bytes(),
            super::client::Transport::Http1,
            self.burst_from,
        ) else {
            return;
        };
        let Ok(url) = self.url.join(&self.path) else {
            return;
        };
        let body = spoil_signature(&self.report);
        let gate = Arc::new(tokio::sync::Semaphore::new(32));
        let mut ticker = tokio::time::interval(self.burst_every);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let mut sent = Vec::with_capacity(self.burst);
            for _ in 0..self.burst {
                let Ok(permit) = gate.clone().acquire_owned().await else {
                    return;
                };
                let request = client
                    .post(url.clone())
                    .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE_JOSE)
                    .body(body.clone());
                sent.push(tokio::spawn(async move {
                    let status = match request.send().await {
                        Ok(r) => r.status().as_u16().to_string(),
                        Err(_) => "error".to_owned(),
                    };
                    drop(permit);
                    status
                }));
            }
            for task in sent {
                let status = task.await.unwrap_or_else(|_| "error".into());
                counts.bad_sent.fetch_add(1, Ordering::Relaxed);
                let mut statuses = counts
                    .bad_statuses
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                *statuses.entry(status).or_default() += 1;
            }
        }
    }
}

impl Hostile {
    /// The hostile traffic `args` ask for, at the hub at `url`; `None` when none.
    pub fn of(
        args: &super::Args,
        url: &reqwest::Url,
        ca_pem: &[u8],
        agent: &super::reports::SimAgent,
    ) -> Option<Self> {
        if args.slow_connections == 0 && args.bad_signature_burst == 0 {
            return None;
        }
        let addr = format!("{}:{}", url.host_str()?, url.port_or_known_default()?);
        Some(Self {
            addr,
            url: url.clone(),
            ca_pem: String::from_utf8_lossy(ca_pem).into_owned(),
            slow_connections: args.slow_connections,
            burst: args.bad_signature_burst,
            burst_every: Duration::from_secs(args.bad_signature_every_seconds),
            burst_from: args.bad_signature_from,
            path: agent.path.clone(),
            report: agent.reports.last()?.clone(),
        })
    }
}

/// Hostile traffic under way, and the hub's log size when it began.
pub struct Attack {
    running: Option<(Arc<HostileCounts>, CancellationToken)>,
    log: Option<(std::path::PathBuf, u64)>,
}

fn size(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

impl Attack {
    /// Starts `hostile` (nothing when `None`), noting the size of the hub's `log`.
    pub fn start(hostile: Option<Hostile>, log: Option<&std::path::Path>) -> anyhow::Result<Self> {
        let Some(hostile) = hostile else {
            return Ok(Self {
                running: None,
                log: None,
            });
        };
        let (slow, burst) = (hostile.slow_connections, hostile.burst);
        let every = hostile.burst_every.as_secs();
        println!(
            "hostile: slow_connections={slow} (idle, slow headers, slow body) \
             bad_signature_burst={burst} every {every}s"
        );
        let stop = CancellationToken::new();
        let counts = hostile.start(stop.clone())?;
        Ok(Self {
            running: Some((counts, stop)),
            log: log.map(|p| (p.to_owned(), size(p))),
        })
    }

    /// Stops the traffic and prints what it did and how much the hub logged meanwhile
    /// (`elapsed`: how long it ran).
    pub fn finish(self, elapsed: Duration) {
        let Some((counts, stop)) = self.running else {
            return;
        };
        stop.cancel();
        let minutes = elapsed.as_secs_f64() / 60.0;
        let grown = self
            .log
            .as_ref()
            .map(|(p, start)| size(p).saturating_sub(*start));
        println!(
            "hostile: slow_opened={} slow_ended={:?} bad_signature_sent={} answers={:?}",
            counts.slow_opened.load(Ordering::Relaxed),
            counts
                .slow_closed
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
            counts.bad_sent.load(Ordering::Relaxed),
            counts
                .bad_statuses
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        match (grown, &self.log) {
            (Some(bytes), Some((path, start))) => {
                println!(
                    "hostile: hub_log_bytes={bytes} over {:.1}s, log_bytes_per_minute={:.0}",
                    elapsed.as_secs_f64(),
                    bytes as f64 / minutes
                );
                let text = std::fs::read(path).unwrap_or_default();
                let new = String::from_utf8_lossy(text.get(*start as usize..).unwrap_or_default());
                for line in new.lines().take(5) {
                    println!("  hub log: {}", line.chars().take(240).collect::<String>());
                }
            }
            _ => println!("hostile: hub log unknown (a hub at --url)"),
        }
    }
}

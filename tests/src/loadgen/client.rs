//! How the simulated fleet reaches the hub: a few shared HTTPS clients, the way agents
//! behind a load balancer (or an L7 proxy) arrive over a handful of long-lived
//! connections, or a new connection for every heartbeat (the worst case).
//!
//! TLS is the agent's own client configuration ([`fleetpulse_agent::tls::client_config`],
//! rustls with ring, trusting only the hub's CA).

use std::time::Duration;

use clap::ValueEnum;

use fleetpulse_agent::tls::client_config;

/// The connection behaviour of the simulated fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// HTTP/2 over TLS (what agents negotiate by ALPN): each client keeps one connection
    /// and multiplexes its agents' heartbeats over it.
    Http2,
    /// HTTP/1.1 over TLS with keep-alive: each client keeps a pool of connections, one per
    /// request in flight.
    Http1,
    /// HTTP/1.1 with a new TCP connection and a full TLS handshake (no session resumption)
    /// for every heartbeat.
    NewConnection,
}

impl Transport {
    /// The name used on the command line and in the output.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http2 => "http2",
            Transport::Http1 => "http1",
            Transport::NewConnection => "new-connection",
        }
    }
}

/// `count` independent clients (each with its own connections) for the hub whose CA is
/// `ca_pem`.
pub fn clients(
    ca_pem: &[u8],
    transport: Transport,
    count: usize,
) -> anyhow::Result<Vec<reqwest::Client>> {
    (0..count.max(1))
        .map(|_| client(ca_pem, transport))
        .collect()
}

/// `count` clients as [`clients`] that follow one redirect (a 307 keeps the method and
/// body), as an agent that lands on a replica not owning its cluster's shard does.
pub fn clients_following_redirects(
    ca_pem: &[u8],
    transport: Transport,
    count: usize,
) -> anyhow::Result<Vec<reqwest::Client>> {
    (0..count.max(1))
        .map(|_| {
            let builder = builder(ca_pem, transport)?;
            Ok(builder
                .redirect(reqwest::redirect::Policy::limited(1))
                .build()?)
        })
        .collect()
}

/// One client.
pub fn client(ca_pem: &[u8], transport: Transport) -> anyhow::Result<reqwest::Client> {
    Ok(builder(ca_pem, transport)?.build()?)
}

/// One client whose connections leave from the loopback address `from` (e.g. 127.0.0.2),
/// so the hub counts its traffic as another source's than the fleet's. The hub listens on
/// 127.0.0.1, so `localhost` is pinned there (an IPv4 source cannot reach `::1`).
pub fn client_from(
    ca_pem: &[u8],
    transport: Transport,
    from: std::net::Ipv4Addr,
) -> anyhow::Result<reqwest::Client> {
    Ok(builder(ca_pem, transport)?
        .local_address(std::net::IpAddr::V4(from))
        .resolve("localhost", std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .build()?)
}

fn builder(ca_pem: &[u8], transport: Transport) -> anyhow::Result<reqwest::ClientBuilder> {
    let mut tls = client_config(Some(ca_pem))?;
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .tcp_nodelay(true)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("fleetpulse-loadgen/", env!("CARGO_PKG_VERSION")));
    match transport {
        Transport::Http2 => {}
        Transport::Http1 => {
            tls.alpn_protocols = vec![b"http/1.1".to_vec()];
            builder = builder.http1_only();
        }
        Transport::NewConnection => {
            tls.alpn_protocols = vec![b"http/1.1".to_vec()];
            tls.resumption = rustls::client::Resumption::disabled();
            builder = builder.http1_only().pool_max_idle_per_host(0);
        }
    }
    Ok(builder.tls_backend_preconfigured(tls))
}

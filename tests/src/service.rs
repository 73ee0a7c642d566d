//! [`ReadyProxy`]: a stand-in for a Kubernetes Service in front of several hub replicas. It
//! forwards each new TCP connection (TLS passes through untouched) to the first backend
//! whose `/readyz` answers 200, as kube-proxy routes only to ready endpoints; a standby
//! hub is not ready, so agents reach whichever replica leads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One backend: where to connect, and the base URL its readiness is probed at.
#[derive(Clone, Debug)]
pub struct Backend {
    /// Address connections are forwarded to.
    pub addr: SocketAddr,
    /// Base URL of the same server, for `GET /readyz`.
    pub url: reqwest::Url,
}

/// A running proxy; stops when dropped.
pub struct ReadyProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    refused: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl ReadyProxy {
    /// Listens on a free loopback port; `probe` is the client readiness checks use (it must
    /// trust the backends' certificates).
    pub async fn start(backends: Vec<Backend>, probe: reqwest::Client) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let refused = Arc::new(AtomicU64::new(0));
        let counter = refused.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (backends, probe, counter) = (backends.clone(), probe.clone(), counter.clone());
                tokio::spawn(async move {
                    match ready_backend(&backends, &probe).await {
                        Some(addr) => {
                            if let Ok(mut server) = TcpStream::connect(addr).await {
                                let mut client = client;
                                let _ =
                                    tokio::io::copy_bidirectional(&mut client, &mut server).await;
                            }
                        }
                        None => {
                            counter.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        Ok(Self {
            addr,
            refused,
            task,
        })
    }

    /// Connections closed because no backend was ready.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl Drop for ReadyProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn ready_backend(backends: &[Backend], probe: &reqwest::Client) -> Option<SocketAddr> {
    for backend in backends {
        let Ok(url) = backend.url.join("/readyz") else {
            continue;
        };
        let ready = probe
            .get(url)
            .timeout(std::time::Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ready {
            return Some(backend.addr);
        }
    }
    None
}

//! [`ReadyProxy`]: a stand-in for a Kubernetes Service in front of several hub replicas. It
//! forwards each new TCP connection (TLS passes through untouched) to the first backend
//! the [`Routing`] allows: one whose `/readyz` answers 200 (a Service over ready
//! endpoints), or one whose Pod carries a label (a Service whose selector includes the
//! hub leader's `fleetpulse.io/leader=true`).

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
    /// The backend's Pod, for [`Routing::PodLabel`].
    pub pod: Option<String>,
}

/// Which backends a connection may go to.
#[derive(Clone)]
pub enum Routing {
    /// Those whose `/readyz` answers 200; `probe` must trust their certificates.
    Ready(reqwest::Client),
    /// Those whose Pod in `namespace` has `label=true`.
    PodLabel {
        /// The cluster the Pods are in.
        client: kube::Client,
        /// Their namespace.
        namespace: String,
        /// The label selecting them.
        label: String,
    },
}

/// A running proxy; stops when dropped.
pub struct ReadyProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    refused: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl ReadyProxy {
    /// Listens on a free loopback port.
    pub async fn start(backends: Vec<Backend>, routing: Routing) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let refused = Arc::new(AtomicU64::new(0));
        let counter = refused.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (backends, routing, counter) =
                    (backends.clone(), routing.clone(), counter.clone());
                tokio::spawn(async move {
                    // The first allowed backend that takes the connection: a Service's
                    // endpoints leave out a Pod whose process is gone.
                    for addr in route(&backends, &routing).await {
                        if let Ok(mut server) = TcpStream::connect(addr).await {
                            let mut client = client;
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                            return;
                        }
                    }
                    counter.fetch_add(1, Ordering::Relaxed);
                });
            }
        });
        Ok(Self {
            addr,
            refused,
            task,
        })
    }

    /// Connections closed because no allowed backend took them.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl Drop for ReadyProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The backends the routing allows, in order.
async fn route(backends: &[Backend], routing: &Routing) -> Vec<SocketAddr> {
    let mut allowed_addrs = Vec::new();
    for backend in backends {
        let allowed = match routing {
            Routing::Ready(probe) => {
                let Ok(url) = backend.url.join("/readyz") else {
                    continue;
                };
                probe
                    .get(url)
                    .timeout(std::time::Duration::from_secs(2))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success())
            }
            Routing::PodLabel {
                client,
                namespace,
                label,
            } => {
                let Some(pod) = &backend.pod else {
                    continue;
                };
                let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
                    kube::Api::namespaced(client.clone(), namespace);
                pods.get_opt(pod).await.ok().flatten().is_some_and(|p| {
                    p.metadata
                        .labels
                        .and_then(|l| l.get(label).cloned())
                        .as_deref()
                        == Some("true")
                })
            }
        };
        if allowed {
            allowed_addrs.push(backend.addr);
        }
    }
    allowed_addrs
}

//! Running the hub: TLS, the agents' listener and the admin listener, and the background
//! loops (failure detector tick, manifest reload, position flush), with a graceful
//! shutdown that persists state.

pub mod admin;
mod background;
mod limits;
mod listener;
mod manifests;
mod options;
mod readiness;
mod services;
pub mod shard_gate;
mod sharding;
pub mod standby;
pub mod tls;

pub use admin::{AdminAuth, AdminOptions};
pub use limits::ConnectionLimits;
pub use options::HubOptions;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::admission::Admission;
use crate::embedded::manifests::ManifestDir;
use crate::fleet::{Fleet, Settings};
use crate::ingest::{self, AppState};
use crate::kubernetes::leader::{self, Leadership};
use crate::kubernetes::source::KubeSource;
use crate::kubernetes::store::KubeStore;
use crate::kubernetes::store::hub_state::StateSettings;
use crate::limiter::failures::FailureLimit;
use crate::store::sqlite::SqliteStore;
use crate::store::{Store, StoreError, StoreWriter};

/// The hub could not start.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// Plain HTTP asked for without the development flag, or no TLS files.
    #[error(
        "no TLS certificate: pass --tls-cert and --tls-key, or --insecure-http for local development"
    )]
    NoTls,
    /// TLS files unreadable.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The data or manifest directory is unusable.
    #[error("{path}: {source}; check the directory exists and is writable")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Leader election failed.
    #[error(transparent)]
    Leader(#[from] leader::LeaderError),
    /// This replica stopped leading (another took the lease, or it could not renew it in
    /// time); it stopped without writing more.
    #[error("{0}; this replica stopped without writing more")]
    LostLeadership(leader::Lost),
    /// Stopped, but the state could not all be persisted.
    #[error("stopped, but state was not persisted: {0}")]
    NotPersisted(String),
    /// The enrolment store could not be opened.
    #[error(transparent)]
    Enrolment(#[from] crate::enrolment::store::EnrolStoreError),
    /// The admin listener's authentication could not be set up.
    #[error(transparent)]
    Admin(#[from] admin::AdminError),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// A running hub.
pub struct Hub {
    /// The bound address of the agents' listener.
    pub addr: SocketAddr,
    /// The bound address of the admin listener (read API, `/metrics`).
    pub admin_addr: SocketAddr,
    /// The fleet state (for tests and embedding).
    pub fleet: Arc<Fleet>,
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
    leadership: Option<Leadership>,
    /// The shard Lease loop, when replicas share the fleet.
    sharding: Option<sharding::Running>,
    store: StoreWriter,
}

impl Hub {
    /// Binds, waits for the lease (with leader election), opens the store, loads the
    /// objects and starts serving.
    pub async fn start(opts: HubOptions) -> Result<Hub, HubError> {
        Self::bind(opts).await?.start().await
    }

    /// Binds and answers probes (not ready yet); [`Starting::start`] does the rest.
    pub async fn bind(opts: HubOptions) -> Result<Starting, HubError> {
        let tls = match (&opts.tls, opts.insecure_http) {
            (Some((cert, key)), _) => Some(tls::server_config(cert, key)?),
            (None, true) => None,
            (None, false) => return Err(HubError::NoTls),
        };
        let guard = admin::Guard::new(&opts.admin, opts.kube.as_ref())?;
        // One limit of authentication failures per source, shared by both listeners.
        let failures = Arc::new(FailureLimit::new(opts.limits.failure_limit()));
        let shutdown = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let (listener, addr) = listener::bound(opts.listen).await?;
        let (admin_listener, admin_addr) = listener::bound(opts.admin.listen).await?;
        // Probes answer from the start; everything else is refused until this replica
        // leads and has loaded its state.
        let (router, routed) =
            watch::channel(standby::router("loading objects and state", false).into());
        let (admin, admin_routed) =
            watch::channel(standby::admin_router("loading objects and state").into());
        tracing::info!(addr = %admin_addr, auth = guard.describe(), "admin API (read API, /metrics) bound");
        tracing::info!(%addr, "listening; agents are served once this replica leads and has loaded its state");
        tasks.spawn(listener::serve(
            admin_listener,
            admin::protect(
                listener::Switch::new(admin_routed).into_router(),
                guard,
                failures.clone(),
            ),
            tls.clone(),
            opts.limits.clone(),
            shutdown.clone(),
        ));
        tasks.spawn(listener::serve(
            listener,
            listener::Switch::new(routed),
            tls,
            opts.limits.clone(),
            shutdown.clone(),
        ));
        Ok(Starting {
            addr,
            admin_addr,
            opts,
            router,
            admin,
            failures,
            shutdown,
            tasks,
        })
    }
}

/// A hub that is bound and answers probes, not yet serving agents.
pub struct Starting {
    /// The bound address of the agents' listener.
    pub addr: SocketAddr,
    /// The bound address of the admin listener.
    pub admin_addr: SocketAddr,
    opts: HubOptions,
    router: watch::Sender<listener::Routed>,
    admin: watch::Sender<listener::Routed>,
    failures: Arc<FailureLimit>,
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
}

impl Starting {
    /// Waits for the lease (with leader election; a standby waits here), opens the store,
    /// loads the objects and starts serving agents.
    pub async fn start(self) -> Result<Hub, HubError> {
        let Starting {
            addr,
            admin_addr,
            opts,
            router,
            admin,
            failures,
            shutdown,
            mut tasks,
        } = self;
        // The watches start now: a standby follows the objects while it waits, so taking
        // over lists nothing again.
        let mut source = opts.kube.as_ref().map(|c| KubeSource::start(c, &shutdown));
        let leadership = match (&opts.kube, &opts.leader, source.as_mut()) {
            (Some(client), Some(settings), Some(source)) if opts.shards.is_none() => {
                let labelled = settings.pod.is_some();
                router.send_modify(|r| {
                    *r = standby::router(
                        "standing by: another hub replica holds the lease",
                        labelled,
                    )
                    .into()
                });
                admin.send_modify(|r| {
                    *r = standby::admin_router("standing by: another hub replica holds the lease")
                        .into()
                });
                let leadership = tokio::select! {
                    leadership = leader::acquire(client.clone(), settings) => leadership?,
                    () = source.follow() => unreachable!("following never ends"),
                };
                router.send_modify(|r| {
                    *r = standby::router("loading objects and state", false).into()
                });
                admin.send_modify(|r| {
                    *r = standby::admin_router("loading objects and state").into()
                });
                Some(leadership)
            }
            _ => None,
        };
        let settings = opts.decisions.clone();
        let cell = sharding::Cell::default();
        let (fleet, manifests, writer) = match (&opts.kube, source) {
            (Some(client), Some(mut source)) => {
                let instance = (opts.shards.as_ref().map(|s| s.identity.clone()))
                    .or_else(|| opts.leader.as_ref().map(|l| l.identity.clone()));
                let lease = (opts.shards.as_ref().map(|s| s.duration))
                    .or_else(|| opts.leader.as_ref().map(|l| l.duration))
                    .unwrap_or(Duration::ZERO);
                let state = StateSettings {
                    namespace: opts.state_namespace.clone(),
                    holder: instance.clone().unwrap_or_else(|| "fleetpulse-hub".into()),
                    // A crashed leader's last flush is at most a flush interval old when it
                    // dies, and a standby takes over at most a lease later (plus a tick).
                    max_age: opts.position_flush_interval + lease + opts.tick,
                };
                let runtime = tokio::runtime::Handle::current();
                let missing = source.ready().await;
                let store = KubeStore::new(client.clone(), runtime, instance).with_state(state);
                let store = match &opts.shards {
                    Some(s) => store.sharded(cell.sharded(s.shards)),
                    None => store,
                };
                let mut store = store.with_objects(source.objects());
                let (store, mut snapshot) =
                    tokio::task::spawn_blocking(move || store.load().map(|s| (store, s)))
                        .await
                        .expect("loading the store does not panic")?;
                if opts.shards.is_some() {
                    // Sharing the fleet, a replica takes each shard's positions over when
                    // it takes the shard (`sharding`), not at start: the objects of shards
                    // other replicas hold are theirs to flush, so the start's own view of
                    // them says nothing of lost positions.
                    snapshot.positions_kept = crate::store::PositionsKept::All;
                }
                let writer = StoreWriter::spawn(store);
                let fleet = Arc::new(Fleet::new(settings, writer.clone()));
                fleet.restore(snapshot, Instant::now(), Timestamp::now());
                for problem in fleet.reload(source.objects(), Instant::now(), Timestamp::now()) {
                    tracing::error!(problem, "conflicting objects");
                }
                tasks.spawn(source.drive(fleet.clone(), missing, shutdown.clone()));
                (fleet, None, writer)
            }
            _ => {
                std::fs::create_dir_all(&opts.data).map_err(|source| HubError::Dir {
                    path: opts.data.clone(),
                    source,
                })?;
                let mut store = SqliteStore::open(&opts.data)?;
                let snapshot = store.load()?;
                let writer = StoreWriter::spawn(store);
                let fleet = Arc::new(Fleet::new(settings, writer.clone()));
                fleet.restore(snapshot, Instant::now(), Timestamp::now());
                let mut manifests = ManifestDir::new(&opts.manifests);
                manifests::load_every(&fleet, &mut manifests, &router, opts.reload_interval).await;
                (fleet, Some(manifests), writer)
            }
        };
        if opts.per_cluster_metrics {
            fleet.metrics().transitions.enable_per_cluster();
        }
        if let Some(batch) = &opts.batch_verify {
            tracing::info!(
                max_batch = batch.max_batch,
                max_wait_ms = batch.max_wait.as_millis() as u64,
                "heartbeat signatures are verified in batches"
            );
        }
        let Settings {
            audience,
            freshness,
            ..
        } = &opts.decisions;
        let admission = Admission::new(
            audience.clone(),
            *freshness,
            opts.batch_verify,
            fleet.metrics().signature_batches.clone(),
        );
        failures.count_limited_sources_in(fleet.metrics().failure_limited_sources.clone());
        let state = AppState {
            fleet: fleet.clone(),
            admission: Arc::new(admission),
            failures,
        };
        let admin_app = ingest::admin_router(state.clone())
            .merge(crate::console::router(fleet.clone(), shutdown.clone()));
        let app = ingest::router(state.clone());
        let app = services::serve_enrolment(&opts, &fleet, app, &shutdown).await?;
        let (app, agents, sharding) = match (&opts.kube, &opts.shards) {
            (Some(client), Some(settings)) => {
                let tls = opts.tls.is_some();
                let (shards, running) =
                    sharding::start(client.clone(), settings.clone(), addr, tls, &fleet, &cell);
                let agents = listener::Direct::new(state, Some(shards.clone()));
                (sharding::gate(app, shards), agents, Some(running))
            }
            _ => (app, listener::Direct::new(state, None), None),
        };
        // The embedded store's writes failing makes `/readyz` fail; in Kubernetes mode
        // status writes retry through API outages, which a restart would not cure.
        let app = match opts.kube {
            None => readiness::gate(app, writer.clone()),
            Some(_) => app,
        };
        services::spawn_mirrors(&fleet, &opts, &shutdown, &mut tasks);
        if let Some(client) = opts.kube.clone().filter(|_| !opts.adopt.kinds.is_empty()) {
            let namespace =
                (opts.adopt.namespace.clone()).unwrap_or_else(|| opts.enrolment_namespace.clone());
            let (fleet, args, stop) = (fleet.clone(), opts.adopt.clone(), shutdown.clone());
            tasks.spawn(crate::adoption::run(client, fleet, args, namespace, stop));
        }
        router.send_modify(|r| *r = listener::Routed::with_agents(app, agents));
        admin.send_modify(|r| *r = admin_app.into());
        tasks.spawn(background::run(
            fleet.clone(),
            manifests,
            opts.clone(),
            shutdown.clone(),
        ));
        tasks.spawn(background::hub_checks(
            fleet.clone(),
            opts.tick,
            shutdown.clone(),
        ));
        let mode = if opts.kube.is_some() {
            "kubernetes"
        } else {
            "embedded"
        };
        tracing::info!(%addr, tls = opts.tls.is_some(), mode, "hub serving");
        Ok(Hub {
            addr,
            admin_addr,
            fleet,
            shutdown,
            tasks,
            leadership,
            sharding,
            store: writer,
        })
    }
}

impl Hub {
    /// Stops serving, persists every accepted position and pending status (the embedded
    /// store checkpoints its WAL into the database file), then releases the lease (if this
    /// replica leads) so a standby takes over at once. Logs whether the state was
    /// persisted, and what was not.
    pub async fn shutdown(self) {
        let _ = self.stop().await;
    }

    async fn stop(mut self) -> Result<(), HubError> {
        self.shutdown.cancel();
        while self.tasks.join_next().await.is_some() {}
        let fleet = self.fleet.clone();
        let _ = tokio::task::spawn_blocking(move || fleet.sync()).await;
        let store = self.store.clone();
        let persisted = tokio::task::spawn_blocking(move || store.close())
            .await
            .unwrap_or_else(|e| Err(format!("the store thread failed: {e}")));
        if let Some(leadership) = self.leadership.take() {
            leadership.release().await;
        }
        if let Some(sharding) = self.sharding.take() {
            sharding.release().await;
        }
        match persisted {
            Ok(()) => {
                tracing::info!("hub stopped; state persisted");
                Ok(())
            }
            Err(problem) => {
                tracing::error!(%problem, "hub stopped; state NOT persisted");
                Err(HubError::NotPersisted(problem))
            }
        }
    }

    /// Runs until `stop` resolves, then shuts down. Fails without writing more if another
    /// replica takes the lease first, or this one cannot renew it within its deadline.
    pub async fn run_until(
        mut self,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<(), HubError> {
        let lost = async {
            match self.leadership.as_mut() {
                Some(leadership) => leadership.lost().await,
                None => std::future::pending().await,
            }
        };
        let lost = tokio::select! {
            _ = stop => None,
            lost = lost => Some(lost),
        };
        if let Some(lost) = lost {
            tracing::error!(reason = %lost, "this replica no longer leads; stopping without writing more");
            self.shutdown.cancel();
            if let Some(leadership) = &self.leadership {
                let _ = tokio::time::timeout(Duration::from_secs(2), leadership.unlabel()).await;
            }
            return Err(HubError::LostLeadership(lost));
        }
        self.stop().await
    }
}

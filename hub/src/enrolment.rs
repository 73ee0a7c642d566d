//! Enrolment on the hub: bootstrap tokens, registrations, rotations, and the enrolled keys
//! the heartbeat path consults when a key is not in any `spec.agent.publicKeys`.
//!
//! - [`backend`]: where the tokens and key sets are kept, read and written conditionally:
//!   [`store`] (embedded mode: `enrolment.db` under `--data`, shared with the CLI) or
//!   [`secrets`] (Kubernetes mode: Secrets of the hub's namespace, watched).
//! - [`register`]: the registration and rotation rules applied against the store.
//! - [`routes`]: `POST /v1/enrol` and `POST /v1/rotate`.
//!
//! Enrolled keys are cached in memory; this process's own writes go into the cache at once,
//! and the cache reloads when somebody else changed the state (the CLI's `approve`, `key
//! revoke` or `key rotate`; another replica), checked at most once a second, so a revoked
//! key is refused within a second or so. The heartbeat path never waits for the store.

pub mod backend;
pub mod register;
pub mod routes;
pub mod secrets;
pub mod store;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetpulse_common::protocol::keys::{self, StrongKey};
use parking_lot::{Mutex, RwLock};

use fleetpulse_common::api::condition::Status;
use fleetpulse_common::enrol::keyset::{KeySet, KeyState, Verdict};
use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::replay::{Freshness, Rejection};
use fleetpulse_common::protocol::report::ClusterId;
use tokio_util::sync::CancellationToken;

use crate::limiter::{Limit, Limiter};
use backend::Backend;
pub use backend::EnrolStoreError;
use store::EnrolStore;

pub use fleetpulse_common::api::condition::ENROLLED;
/// `Enrolled=False` reason: a registration waits for `fleetpulse-hub approve`.
pub const AWAITING_APPROVAL: &str = "AwaitingApproval";
/// `Enrolled=False` reason: no agent has registered yet.
pub const AWAITING_ENROLMENT: &str = "AwaitingEnrolment";

/// How often the cache checks the store for changes made by another process.
const RECHECK: Duration = Duration::from_secs(1);

/// What the enrolment rules need from the hub's settings.
#[derive(Clone, Debug)]
pub struct EnrolSettings {
    /// The hub's `--audience`.
    pub audience: String,
    /// The freshness window on `iat`/`exp`.
    pub freshness: Freshness,
    /// How long the previous key stays accepted after a rotation.
    pub overlap: Duration,
    /// Refusals allowed per source address.
    pub per_source: Limit,
    /// Refusals allowed per token id.
    pub per_token: Limit,
}

impl EnrolSettings {
    /// Defaults: 10 minutes of overlap, 20 refusals a minute per source, 5 per token id.
    pub fn new(audience: String, freshness: Freshness) -> Self {
        let minute = Duration::from_secs(60);
        Self {
            audience,
            freshness,
            overlap: Duration::from_secs(600),
            per_source: Limit {
                allowed: 20,
                window: minute,
            },
            per_token: Limit {
                allowed: 5,
                window: minute,
            },
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Cache {
    /// Each enrolled key's cluster, and its public key parsed once when its set entered
    /// the cache (a heartbeat would otherwise decode it and decompress its point, about
    /// 4.7 µs); `None` for one that does not parse.
    keys: HashMap<String, (ClusterId, Option<StrongKey>)>,
    sets: HashMap<ClusterId, KeySet>,
}

impl Cache {
    fn of(sets: Vec<KeySet>) -> Self {
        let mut cache = Cache::default();
        for set in sets {
            cache.hold(set);
        }
        cache
    }

    /// Holds `set`, its keys and their parsed public keys (nothing of its cluster is held).
    fn hold(&mut self, set: KeySet) {
        for k in &set.keys {
            let parsed = keys::parse_public_key(&k.public_key).ok();
            (self.keys).insert(k.key_id.clone(), (set.cluster.clone(), parsed));
        }
        self.sets.insert(set.cluster.clone(), set);
    }

    /// `set` replaces what the cache held of its cluster.
    fn insert(&mut self, set: KeySet) {
        self.keys.retain(|_, (owner, _)| *owner != set.cluster);
        self.hold(set);
    }
}

/// The hub's enrolment state: the backend and the cache of enrolled keys.
pub struct Enrolment {
    backend: Box<dyn Backend>,
    /// Registrations and rotations of this process, one at a time.
    writing: Mutex<()>,
    cache: RwLock<Arc<Cache>>,
    checked: Mutex<(Instant, u64)>,
    /// Refusals per source address and per token id (limited at the first step).
    limits: Mutex<(Limiter<String>, Limiter<String>)>,
    settings: EnrolSettings,
}

impl Enrolment {
    /// Opens the embedded store under `data` and loads the enrolled keys.
    pub fn open(data: &Path, settings: EnrolSettings) -> Result<Arc<Self>, EnrolStoreError> {
        Self::new(Box::new(EnrolStore::open(data)?), settings)
    }

    /// Loads the enrolled keys from `backend`.
    pub fn new(
        backend: Box<dyn Backend>,
        settings: EnrolSettings,
    ) -> Result<Arc<Self>, EnrolStoreError> {
        let version = backend.version()?;
        let cache = Cache::of(backend.keysets()?);
        Ok(Arc::new(Self {
            backend,
            writing: Mutex::new(()),
            cache: RwLock::new(Arc::new(cache)),
            checked: Mutex::new((Instant::now(), version)),
            limits: Mutex::new((
                Limiter::new(settings.per_source),
                Limiter::new(settings.per_token),
            )),
            settings,
        }))
    }

    /// The settings.
    pub fn settings(&self) -> &EnrolSettings {
        &self.settings
    }

    /// The cluster `kid` is enrolled for, if any.
    pub fn owner(&self, kid: &str) -> Option<ClusterId> {
        self.refresh_if_changed();
        self.cache
            .read()
            .keys
            .get(kid)
            .map(|(owner, _)| owner.clone())
    }

    /// Puts a key set this process wrote into the cache, so heartbeats see it at once.
    fn cache_put(&self, set: KeySet) {
        let mut cache = self.cache.write();
        let mut next = (**cache).clone();
        next.insert(set);
        *cache = Arc::new(next);
    }

    /// Reloads the cache if another process changed the store; checks at most every
    /// [`RECHECK`]. A store error keeps the cache as it is and is logged.
    fn refresh_if_changed(&self) {
        // Heartbeats of enrolled keys all pass here: one of them checks, the others go on.
        let Some(mut checked) = self.checked.try_lock() else {
            return;
        };
        if checked.0.elapsed() < RECHECK {
            return;
        }
        // A registration writing now puts its key set into the cache itself; a reload
        // read before its write would lose it.
        let Some(_writing) = self.writing.try_lock() else {
            return;
        };
        checked.0 = Instant::now();
        let result = self.backend.version().and_then(|version| {
            if version != checked.1 {
                let cache = Cache::of(self.backend.keysets()?);
                *self.cache.write() = Arc::new(cache);
                checked.1 = version;
            }
            Ok(())
        });
        if let Err(error) = result {
            tracing::error!(%error, "cannot re-read the enrolment store; keeping the enrolled keys as they were");
        }
    }
}

impl crate::fleet::EnrolledKeys for Enrolment {
    fn rotation_requested(&self, cluster: &ClusterId) -> bool {
        self.refresh_if_changed();
        let cache = self.cache.read();
        cache
            .sets
            .get(cluster)
            .is_some_and(|s| s.rotation_requested)
    }

    fn lookup(&self, cluster: &ClusterId, kid: &str) -> Option<Result<StrongKey, Rejection>> {
        self.refresh_if_changed();
        let cache = self.cache.read().clone();
        let (owner, parsed) = cache.keys.get(kid)?;
        let refuse = |code, message: String| {
            Some(Err(Rejection {
                code,
                message,
                last_accepted: None,
            }))
        };
        if owner != cluster {
            return refuse(
                RejectCode::KeyNotForCluster,
                format!("key {kid} is enrolled for MemberCluster {owner}, not {cluster}"),
            );
        }
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        match cache.sets.get(owner)?.verdict_with(kid, now, |_| *parsed)? {
            Verdict::Accept(key) => Some(Ok(key)),
            Verdict::Pending => refuse(
                RejectCode::UnknownKey,
                format!(
                    "key {kid} of MemberCluster {cluster} awaits approval; on the hub run \
                     `fleetpulse-hub approve {cluster}`"
                ),
            ),
            Verdict::Retired => refuse(
                RejectCode::KeyRetired,
                format!(
                    "key {kid} of MemberCluster {cluster} was replaced by a rotation and its \
                     overlap ended; the agent signs with its new key"
                ),
            ),
            Verdict::Revoked => refuse(
                RejectCode::KeyRevoked,
                format!(
                    "key {kid} of MemberCluster {cluster} is revoked; re-enrol: `fleetpulse-hub \
                     token create --cluster {cluster}` on the hub, then run the agent with \
                     --bootstrap-token and a new key"
                ),
            ),
        }
    }
}

impl Cache {
    /// The `Enrolled` condition of `cluster`: `True` with an active enrolled key; `False`
    /// while its registration awaits approval, or when every enrolled key was revoked or
    /// replaced; `False` (`AwaitingEnrolment`) for a cluster that has neither an enrolled
    /// key nor one in `spec.agent.publicKeys`. `None`: a cluster with pre-shared keys only.
    fn condition(
        &self,
        cluster: &ClusterId,
        pre_shared: bool,
    ) -> Option<(Status, &'static str, String)> {
        let Some(set) = self.sets.get(cluster) else {
            return (!pre_shared).then(|| {
                let message = format!(
                    "no agent has enrolled yet: on the hub run `fleetpulse-hub token create \
                     --cluster {cluster}` and start the agent with that token"
                );
                (Status::False, AWAITING_ENROLMENT, message)
            });
        };
        // The message names no key: a rotation changes the key, not the condition.
        if set.active().is_some() {
            let message = "an enrolled key is in force (rotated as the agent's schedule says)";
            return Some((Status::True, "KeyEnrolled", message.to_owned()));
        }
        if set.keys.iter().any(|k| k.state == KeyState::Pending) {
            let message =
                format!("a registration awaits approval: run `fleetpulse-hub approve {cluster}`");
            return Some((Status::False, AWAITING_APPROVAL, message));
        }
        let message = format!(
            "no enrolled key is in force (revoked or replaced): `fleetpulse-hub token create \
             --cluster {cluster}`, then run the agent with the token and a new key"
        );
        Some((Status::False, "NoEnrolledKey", message))
    }
}

impl Enrolment {
    /// Keeps every cluster's `Enrolled` condition current (registrations, approvals and
    /// revocations made by this process or the CLI): looks once a second, and goes over
    /// the clusters only when the enrolled keys or the objects changed since it last did.
    async fn follow(self: Arc<Self>, fleet: Arc<crate::fleet::Fleet>, stop: CancellationToken) {
        let mut every = tokio::time::interval(RECHECK);
        let mut seen: Option<(Arc<Cache>, Arc<crate::fleet::Registry>)> = None;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            self.refresh_if_changed();
            let (cache, registry) = (self.cache.read().clone(), fleet.registry());
            if seen
                .as_ref()
                .is_some_and(|(c, r)| Arc::ptr_eq(c, &cache) && Arc::ptr_eq(r, &registry))
            {
                continue;
            }
            let now = k8s_openapi::jiff::Timestamp::now();
            for entry in registry.clusters() {
                let pre_shared = !entry.object.spec.agent.public_keys.is_empty();
                let wanted = cache.condition(&entry.id, pre_shared);
                let value = wanted.as_ref().map(|(s, r, m)| (*s, *r, m.as_str()));
                fleet.set_condition(&entry.id, ENROLLED, value, now);
            }
            seen = Some((cache, registry));
        }
    }
}

/// Where the enrolment state is kept.
#[derive(Clone, Copy)]
pub enum EnrolPlace<'a> {
    /// In the Secrets of `namespace` (Kubernetes mode), watched.
    Secrets {
        /// The hub cluster's client.
        client: &'a kube::Client,
        /// The enrolment namespace.
        namespace: &'a str,
    },
    /// In the embedded store under this `--data` directory.
    Data(&'a std::path::Path),
}

/// The enrolment namespace when none is given.
pub const DEFAULT_NAMESPACE: &str = "fleetpulse-system";

/// Opens the enrolment state (embedded: the store under `--data`; Kubernetes: the Secrets
/// of the enrolment namespace, watched), has the fleet accept its keys, keeps the
/// `Enrolled` conditions current and adds the enrolment routes to `app`.
pub async fn serve(
    place: EnrolPlace<'_>,
    settings: EnrolSettings,
    fleet: &Arc<crate::fleet::Fleet>,
    app: axum::Router,
    stop: &CancellationToken,
) -> Result<axum::Router, EnrolStoreError> {
    let enrolment = match place {
        EnrolPlace::Secrets { client, namespace } => {
            let backend = secrets::SecretStore::watched(client.clone(), namespace, stop).await?;
            tracing::info!(%namespace, "enrolment state is kept in Secrets");
            Enrolment::new(Box::new(backend), settings)?
        }
        EnrolPlace::Data(data) => Enrolment::open(data, settings)?,
    };
    fleet.use_enrolled_keys(enrolment.clone());
    tokio::spawn(enrolment.clone().follow(fleet.clone(), stop.clone()));
    Ok(app.merge(routes::router(enrolment, fleet.clone())))
}

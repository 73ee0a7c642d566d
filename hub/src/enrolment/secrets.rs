//! Kubernetes mode: enrolment state in Secrets of the hub's namespace, so who may create
//! tokens, approve or revoke keys is whoever RBAC lets write Secrets there, and GitOps
//! tools that own the MemberClusters never fight over registered keys.
//!
//! - A token is the Secret `fleetpulse-token-<id>` of type `fleetpulse.io/bootstrap-token`;
//!   its `record` holds the token's record (a hash of the secret, never the secret).
//! - A key set is the Secret `fleetpulse-keys-<hash>` of type `fleetpulse.io/enrolled-keys`
//!   (the hash of `namespace/name`, since a name of that length does not fit), annotated
//!   `fleetpulse.io/cluster: namespace/name`; its `keyset` holds the cluster's key set.
//! - Both are labelled `fleetpulse.io/enrolment` (`token` or `keyset`), which the hub
//!   watches; writes carry the `resourceVersion` they read, so the API server refuses a
//!   write that would overwrite somebody else's.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use fleetpulse_common::api::MemberCluster;
use fleetpulse_common::enrol::keyset::KeySet;
use fleetpulse_common::enrol::token::{TokenRecord, hex};
use fleetpulse_common::protocol::report::ClusterId;

use super::backend::{Backend, EnrolStoreError, Versioned};

/// The label on every enrolment Secret; its value is `token` or `keyset`.
pub const LABEL: &str = "fleetpulse.io/enrolment";
/// The label on a MemberCluster a registration created: the id of its token.
pub const CREATED_BY_TOKEN: &str = "fleetpulse.io/created-by-token";
/// The annotation naming a key set's MemberCluster.
pub const CLUSTER_ANNOTATION: &str = "fleetpulse.io/cluster";
const TOKEN_TYPE: &str = "fleetpulse.io/bootstrap-token";
const KEYSET_TYPE: &str = "fleetpulse.io/enrolled-keys";

/// The Secret holding the token `id`.
pub fn token_secret_name(id: &str) -> String {
    format!("fleetpulse-token-{id}")
}

/// The Secret holding `cluster`'s key set.
pub fn keyset_secret_name(cluster: &ClusterId) -> String {
    let digest = Sha256::digest(cluster.to_string().as_bytes());
    format!("fleetpulse-keys-{}", &hex(&digest)[..20])
}

#[derive(Clone, Copy)]
enum Kind {
    Token,
    Keyset,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Token => "token",
            Kind::Keyset => "keyset",
        }
    }

    fn data_key(self) -> &'static str {
        match self {
            Kind::Token => "record",
            Kind::Keyset => "keyset",
        }
    }
}

/// The hub's watch of the enrolment Secrets.
struct Watched {
    store: Store<Secret>,
    events: Arc<AtomicU64>,
}

/// Enrolment state in Secrets of one namespace.
pub struct SecretStore {
    api: Api<Secret>,
    namespace: String,
    runtime: Handle,
    watched: Option<Watched>,
}

impl SecretStore {
    /// A store that reads with the API on every call (the CLI).
    pub fn new(client: kube::Client, namespace: &str, runtime: Handle) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            runtime,
            watched: None,
        }
    }

    /// A store whose lists come from a watch (the hub): returns once the watch has listed
    /// every enrolment Secret, so the hub never starts with its enrolled keys missing.
    pub async fn watched(
        client: kube::Client,
        namespace: &str,
        stop: &CancellationToken,
    ) -> Result<Self, EnrolStoreError> {
        let mut this = Self::new(client, namespace, Handle::current());
        // A first list, so a namespace the hub may not read fails the start with a clear
        // error instead of a watch retrying in the background.
        this.api
            .list_metadata(&ListParams::default().labels(LABEL).limit(1))
            .await
            .map_err(|e| this.kube_error("listing the enrolment Secrets".into(), e))?;
        let (store, writer) = reflector::store();
        let events = Arc::new(AtomicU64::new(0));
        let config = watcher::Config::default().labels(LABEL);
        let watch = watcher(this.api.clone(), config).default_backoff();
        let stream = reflector::reflector(writer, watch);
        let (counter, stop) = (events.clone(), stop.clone());
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    event = stream.next() => match event {
                        None => return,
                        Some(Ok(_)) => {
                            counter.fetch_add(1, Ordering::Relaxed);
                        }
                        Some(Err(error)) => {
                            tracing::warn!(%error, "watch of the enrolment Secrets failed; retrying");
                        }
                    },
                }
            }
        });
        store.wait_until_ready().await.ok();
        this.watched = Some(Watched { store, events });
        Ok(this)
    }

    fn kube_error(&self, what: String, source: kube::Error) -> EnrolStoreError {
        EnrolStoreError::Kube {
            what,
            namespace: self.namespace.clone(),
            source,
        }
    }

    fn parse<T: DeserializeOwned>(
        &self,
        kind: Kind,
        secret: &Secret,
    ) -> Result<T, EnrolStoreError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(kind.data_key()))
            .map_or(&[][..], |b| b.0.as_slice());
        serde_json::from_slice(bytes).map_err(|source| EnrolStoreError::Record {
            location: format!("Secret {}/{name}", self.namespace),
            key: kind.data_key().to_owned(),
            source,
        })
    }

    /// Every enrolment Secret of `kind`: from the watch, else listed.
    fn all<T: DeserializeOwned>(&self, kind: Kind) -> Result<Vec<T>, EnrolStoreError> {
        let of_kind = |s: &Secret| {
            let label = s.metadata.labels.as_ref().and_then(|l| l.get(LABEL));
            label.map(String::as_str) == Some(kind.label())
        };
        match &self.watched {
            // Parsed from the watch's own copies: nothing is cloned.
            Some(w) => (w.store.state().iter())
                .filter(|s| of_kind(s))
                .map(|s| self.parse(kind, s))
                .collect(),
            None => {
                let params = ListParams::default().labels(&format!("{LABEL}={}", kind.label()));
                let list = self.runtime.block_on(self.api.list(&params));
                let list =
                    list.map_err(|e| self.kube_error("listing the enrolment Secrets".into(), e))?;
                list.items.iter().map(|s| self.parse(kind, s)).collect()
            }
        }
    }

    fn get<T: DeserializeOwned>(
        &self,
        kind: Kind,
        name: &str,
    ) -> Result<Option<Versioned<T>>, EnrolStoreError> {
        let secret = self
            .runtime
            .block_on(self.api.get_opt(name))
            .map_err(|e| self.kube_error(format!("reading Secret {}/{name}", self.namespace), e))?;
        secret
            .map(|s| {
                Ok(Versioned {
                    value: self.parse(kind, &s)?,
                    revision: s.metadata.resource_version.clone(),
                })
            })
            .transpose()
    }

    fn put<T: Serialize>(
        &self,
        kind: Kind,
        name: String,
        record: &Versioned<T>,
        annotations: Option<BTreeMap<String, String>>,
        what: String,
    ) -> Result<(), EnrolStoreError> {
        let json = serde_json::to_vec(&record.value).expect("an enrolment record serializes");
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    LABEL.to_owned(),
                    kind.label().to_owned(),
                )])),
                annotations,
                resource_version: record.revision.clone(),
                ..Default::default()
            },
            type_: Some(
                match kind {
                    Kind::Token => TOKEN_TYPE,
                    Kind::Keyset => KEYSET_TYPE,
                }
                .to_owned(),
            ),
            data: Some(BTreeMap::from([(
                kind.data_key().to_owned(),
                ByteString(json),
            )])),
            ..Default::default()
        };
        let pp = PostParams::default();
        let result = self.runtime.block_on(async {
            match record.revision {
                Some(_) => self.api.replace(&name, &pp, &secret).await,
                None => self.api.create(&pp, &secret).await,
            }
        });
        match result {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Err(EnrolStoreError::Conflict { what }),
            Err(e) => Err(self.kube_error(
                format!("writing Secret {}/{name} ({what})", self.namespace),
                e,
            )),
        }
    }
}

impl Backend for SecretStore {
    fn creates_clusters(&self) -> bool {
        true
    }

    fn create_cluster(&self, cluster: &ClusterId, token_id: &str) -> Result<(), EnrolStoreError> {
        let client = self.api.clone().into_client();
        let api: Api<MemberCluster> = Api::namespaced(client, &cluster.namespace);
        let mut mc = MemberCluster::new(&cluster.name, Default::default());
        mc.metadata.labels = Some(BTreeMap::from([(
            CREATED_BY_TOKEN.to_owned(),
            token_id.to_owned(),
        )]));
        let params = PostParams {
            field_manager: Some("fleetpulse-enrolment".into()),
            ..PostParams::default()
        };
        match self.runtime.block_on(api.create(&params, &mc)) {
            Ok(_) => {
                tracing::info!(%cluster, token_id, "created the MemberCluster of a registration");
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(source) => Err(EnrolStoreError::Kube {
                what: format!("creating MemberCluster {}", cluster.name),
                namespace: cluster.namespace.clone(),
                source,
            }),
        }
    }

    /// The number of watch events seen (the CLI does not watch, and does not ask).
    fn version(&self) -> Result<u64, EnrolStoreError> {
        Ok(self
            .watched
            .as_ref()
            .map_or(0, |w| w.events.load(Ordering::Relaxed)))
    }

    fn keysets(&self) -> Result<Vec<KeySet>, EnrolStoreError> {
        self.all(Kind::Keyset)
    }

    fn tokens(&self) -> Result<Vec<TokenRecord>, EnrolStoreError> {
        let mut tokens: Vec<TokenRecord> = self.all(Kind::Token)?;
        tokens.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(tokens)
    }

    fn token(&self, id: &str) -> Result<Option<Versioned<TokenRecord>>, EnrolStoreError> {
        self.get(Kind::Token, &token_secret_name(id))
    }

    fn keyset(&self, cluster: &ClusterId) -> Result<Versioned<KeySet>, EnrolStoreError> {
        let found: Option<Versioned<KeySet>> =
            self.get(Kind::Keyset, &keyset_secret_name(cluster))?;
        match found {
            Some(v) if v.value.cluster == *cluster => Ok(v),
            Some(v) => Err(EnrolStoreError::Conflict {
                what: format!(
                    "Secret {}/{} holds the key set of {}, not {cluster} (a hash collision or an \
                     edit); delete it",
                    self.namespace,
                    keyset_secret_name(cluster),
                    v.value.cluster
                ),
            }),
            None => Ok(Versioned::new(KeySet::new(cluster.clone()))),
        }
    }

    fn put_token(&self, token: &Versioned<TokenRecord>) -> Result<(), EnrolStoreError> {
        let id = &token.value.id;
        let what = format!("bootstrap token {id}");
        self.put(Kind::Token, token_secret_name(id), token, None, what)
    }

    fn put_keyset(&self, keyset: &Versioned<KeySet>) -> Result<(), EnrolStoreError> {
        let cluster = &keyset.value.cluster;
        let annotations = BTreeMap::from([(CLUSTER_ANNOTATION.to_owned(), cluster.to_string())]);
        let what = format!("the key set of {cluster}");
        self.put(
            Kind::Keyset,
            keyset_secret_name(cluster),
            keyset,
            Some(annotations),
            what,
        )
    }
}

//! The enrolment commands: `token create|list|revoke`, `approve`, `key revoke|rotate`.
//! They write the hub's enrolment state directly, and the running hub sees their changes
//! within a second:
//! - embedded mode (`--data DIR`): the enrolment store under the hub's data directory, so
//!   whoever may write that directory administers enrolment (the file is the credential;
//!   keep the directory mode 0700, owned by the hub's user);
//! - Kubernetes mode (`--kube`): the Secrets of the enrolment namespace, so Kubernetes RBAC
//!   on Secrets there says who administers enrolment.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::enrol::keyset::KeyState;
use fleetpulse_common::enrol::pin::CaPin;
use fleetpulse_common::enrol::token::{Approval, BootstrapToken, TokenRecord, TokenScope};
use fleetpulse_common::protocol::report::ClusterId;

use crate::enrolment::backend::{Backend, Versioned};
use crate::enrolment::secrets::SecretStore;
use crate::enrolment::store::EnrolStore;

/// Where the enrolment state is.
#[derive(Clone, Debug, Default, Args)]
pub struct StoreArgs {
    /// Embedded mode: the hub's data directory (its `serve --data`).
    #[arg(long, env = "FLEETPULSE_DATA", global = true, conflicts_with = "kube")]
    pub data: Option<PathBuf>,
    /// Kubernetes mode: the Secrets of the enrolment namespace on the management cluster.
    #[arg(long, env = "FLEETPULSE_KUBE", global = true)]
    pub kube: bool,
    /// Kubeconfig for --kube (default: the in-cluster service account, else the usual
    /// kubeconfig lookup).
    #[arg(long, env = "FLEETPULSE_KUBECONFIG", global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the enrolment Secrets for --kube (the hub's `--enrolment-namespace`).
    #[arg(long = "enrolment-namespace", env = "FLEETPULSE_ENROLMENT_NAMESPACE", global = true,
          default_value = crate::enrolment::DEFAULT_NAMESPACE)]
    pub enrolment_namespace: String,
}

impl StoreArgs {
    /// Opens the embedded store or connects to the management cluster.
    pub async fn open(&self) -> anyhow::Result<Box<dyn Backend>> {
        if self.kube {
            let client = super::kube_client(self.kubeconfig.as_deref()).await?;
            let runtime = tokio::runtime::Handle::current();
            return Ok(Box::new(SecretStore::new(
                client,
                &self.enrolment_namespace,
                runtime,
            )));
        }
        let Some(data) = &self.data else {
            anyhow::bail!(
                "pass --data DIR (the data directory of an embedded hub) or --kube (a hub in \
                 Kubernetes mode)"
            );
        };
        if !data.is_dir() {
            anyhow::bail!(
                "--data {} is not a directory; pass the hub's data directory (serve --data)",
                data.display()
            );
        }
        Ok(Box::new(EnrolStore::open(data)?))
    }
}

/// Runs an enrolment command against the backend `store` opens, on the blocking pool (the
/// Kubernetes backend waits for the API there).
pub async fn run<A: Send + 'static>(
    store: &StoreArgs,
    args: A,
    command: fn(A, &dyn Backend) -> anyhow::Result<String>,
) -> anyhow::Result<()> {
    let backend = store.open().await?;
    let out = tokio::task::spawn_blocking(move || command(args, &*backend)).await??;
    fleetpulse_common::cli::print(&out)
}

/// `token`: bootstrap tokens.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// Where the enrolment state is.
    #[command(flatten)]
    pub store: StoreArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: TokenCommand,
}

/// The `token` subcommands.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a one-time token for a cluster (or a namespace and name pattern); prints the
    /// token and the hub CA hash the agent pins.
    Create(CreateArgs),
    /// List tokens (ids, scope, expiry, use; never secrets).
    List,
    /// Revoke a token by id.
    Revoke {
        /// The token id (the part before the dot).
        id: String,
    },
}

/// Flags of `token create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The MemberCluster the token enrols (`--for` is the same: the cluster an adopted
    /// object became).
    #[arg(long, visible_alias = "for", value_name = "NAMESPACE/NAME", env = "FLEETPULSE_TOKEN_CLUSTER",
          value_parser = ClusterId::parse, required_unless_present = "name_pattern")]
    pub cluster: Option<ClusterId>,
    /// Instead of one cluster: any cluster in --namespace whose name matches this pattern
    /// (`*` matches any run of characters), e.g. `edge-*`.
    #[arg(
        long,
        value_name = "PATTERN",
        env = "FLEETPULSE_TOKEN_NAME_PATTERN",
        requires = "namespace",
        conflicts_with = "cluster"
    )]
    pub name_pattern: Option<String>,
    /// Namespace for --name-pattern.
    #[arg(long, env = "FLEETPULSE_TOKEN_NAMESPACE", requires = "name_pattern")]
    pub namespace: Option<String>,
    /// How long the token is valid, e.g. `1h`, `30m`.
    #[arg(long, env = "FLEETPULSE_TOKEN_TTL", default_value = "1h",
          value_parser = fleetpulse_common::duration::parse)]
    pub ttl: Duration,
    /// `auto`: the key is trusted on registration; `manual`: it waits for
    /// `fleetpulse-hub approve NAMESPACE/NAME`.
    #[arg(long, env = "FLEETPULSE_TOKEN_APPROVAL", value_enum, default_value_t = Approval::Auto)]
    pub approval: Approval,
    /// Kubernetes mode: a registration with this token creates its MemberCluster (empty
    /// spec, labelled with the token id) if there is none, e.g. for a name pattern.
    #[arg(long, env = "FLEETPULSE_TOKEN_CREATE_CLUSTER")]
    pub create_cluster: bool,
    /// The hub's certificate chain (its `serve --tls-cert`), whose last certificate is the
    /// CA agents pin; its hash is printed with the token.
    #[arg(long, value_name = "FILE", env = "FLEETPULSE_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
}

/// Flags of `approve`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// Where the enrolment state is.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The MemberCluster whose pending registration to approve.
    #[arg(value_name = "NAMESPACE/NAME", value_parser = ClusterId::parse)]
    pub cluster: ClusterId,
}

/// `key`: enrolled keys.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// Where the enrolment state is.
    #[command(flatten)]
    pub store: StoreArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: KeyCommand,
}

/// The `key` subcommands.
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Revoke an enrolled key: reports signed with it are refused from then on; the agent
    /// re-enrols only with a new token.
    Revoke {
        /// The MemberCluster.
        #[arg(value_name = "NAMESPACE/NAME", value_parser = ClusterId::parse)]
        cluster: ClusterId,
        /// The key id (as `describe` and the agent's log show it).
        key_id: String,
    },
    /// Ask a cluster's agent for a new key: its next heartbeat answer says so, and an
    /// agent that enrolled with a bootstrap token rotates at once (the old key overlaps,
    /// then is retired).
    Rotate {
        /// The MemberCluster.
        #[arg(value_name = "NAMESPACE/NAME", value_parser = ClusterId::parse)]
        cluster: ClusterId,
    },
}

/// The CA pin of the last certificate of a PEM chain file.
pub fn ca_pin_of_chain(path: &Path) -> anyhow::Result<CaPin> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let certs = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("cannot read --tls-cert {}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("--tls-cert {} is not PEM", path.display()))?;
    let Some(ca) = certs.last().filter(|_| certs.len() > 1) else {
        anyhow::bail!(
            "--tls-cert {} holds no CA certificate after the hub's own: append the CA's \
             certificate to the file the hub serves, so agents can pin it",
            path.display()
        );
    };
    Ok(CaPin::of_certificate(ca)?)
}

/// Runs `token ...`.
pub fn token(command: TokenCommand, store: &dyn Backend) -> anyhow::Result<String> {
    let now = Timestamp::now().as_second();
    match command {
        TokenCommand::Create(args) => {
            let pin = args.tls_cert.as_deref().map(ca_pin_of_chain).transpose()?;
            let scope = match (args.cluster, args.name_pattern, args.namespace) {
                (Some(cluster), _, _) => TokenScope::Cluster { cluster },
                (None, Some(name_pattern), Some(namespace)) => TokenScope::Pattern {
                    namespace,
                    name_pattern,
                },
                _ => anyhow::bail!(
                    "pass --cluster NAMESPACE/NAME, or --namespace and --name-pattern"
                ),
            };
            if args.create_cluster && !store.creates_clusters() {
                anyhow::bail!(
                    "--create-cluster needs a hub in Kubernetes mode (--kube); an embedded hub \
                     reads its MemberClusters from its manifest directory: add the file there"
                );
            }
            let token = BootstrapToken::generate();
            let ttl = i64::try_from(args.ttl.as_secs()).unwrap_or(i64::MAX);
            let mut record = TokenRecord::new(&token, scope, args.approval, now, ttl);
            record.creates_cluster = args.create_cluster;
            store.put_token(&Versioned::new(record.clone()))?;
            let pin = pin.map_or_else(
                || "(pass --tls-cert to print it)".to_owned(),
                |p| p.to_string(),
            );
            Ok(format!(
                "token:       {token}\nca hash:     {pin}\nenrols:      {}\nexpires:     {}\napproval:    {}\n",
                record.scope,
                Timestamp::from_second(record.expires_unix)
                    .map_or_else(|_| "never".into(), |t| t.to_string()),
                format!("{:?}", record.approval).to_lowercase(),
            ))
        }
        TokenCommand::List => {
            let mut out = format!(
                "{:<8} {:<32} {:<22} {:<8} {}\n",
                "ID", "ENROLS", "EXPIRES", "APPROVAL", "STATE"
            );
            for t in store.tokens()? {
                let state = match (&t.used, t.revoked) {
                    (_, true) => "revoked".to_owned(),
                    (Some((_, by)), _) => format!("used by {by}"),
                    (None, _) if t.expires_unix <= now => "expired".to_owned(),
                    (None, _) => "unused".to_owned(),
                };
                let expires = Timestamp::from_second(t.expires_unix)
                    .map_or_else(|_| "-".into(), |t| t.to_string());
                out.push_str(&format!(
                    "{:<8} {:<32} {:<22} {:<8} {state}\n",
                    t.id,
                    t.scope.to_string(),
                    expires,
                    format!("{:?}", t.approval).to_lowercase(),
                ));
            }
            Ok(out)
        }
        TokenCommand::Revoke { id } => {
            let Some(mut record) = store.token(&id)? else {
                anyhow::bail!("no bootstrap token {id}; `fleetpulse-hub token list` shows them");
            };
            record.value.revoked = true;
            store.put_token(&record)?;
            Ok(format!("token {id} revoked\n"))
        }
    }
}

/// Runs `approve`.
pub fn approve(cluster: ClusterId, store: &dyn Backend) -> anyhow::Result<String> {
    let mut keyset = store.keyset(&cluster)?;
    let Some(kid) = keyset.value.approve(Timestamp::now().as_second()) else {
        anyhow::bail!(
            "no registration of {cluster} awaits approval; the agent registers when it runs \
             with --bootstrap-token"
        );
    };
    store.put_keyset(&keyset)?;
    Ok(format!("approved key {kid} of {cluster}\n"))
}

/// Runs `key ...`.
pub fn key(command: KeyCommand, store: &dyn Backend) -> anyhow::Result<String> {
    let (cluster, key_id) = match command {
        KeyCommand::Revoke { cluster, key_id } => (cluster, key_id),
        KeyCommand::Rotate { cluster } => return request_rotation(cluster, store),
    };
    let mut keyset = store.keyset(&cluster)?;
    if keyset.value.get(&key_id).map(|k| k.state) == Some(KeyState::Revoked) {
        return Ok(format!("key {key_id} of {cluster} was already revoked\n"));
    }
    if !keyset.value.revoke(&key_id, Timestamp::now().as_second()) {
        anyhow::bail!(
            "{cluster} has no enrolled key {key_id}; a key in spec.agent.publicKeys is revoked \
             there, with `revoked: true`"
        );
    }
    store.put_keyset(&keyset)?;
    Ok(format!("revoked key {key_id} of {cluster}\n"))
}

/// `key rotate`: marks the cluster's key set so the hub asks its agent for a new key.
fn request_rotation(cluster: ClusterId, store: &dyn Backend) -> anyhow::Result<String> {
    let mut keyset = store.keyset(&cluster)?;
    let Some(active) = keyset.value.active().map(|k| k.key_id.clone()) else {
        anyhow::bail!(
            "{cluster} has no enrolled key; a key in spec.agent.publicKeys is rotated by \
             editing that list"
        );
    };
    keyset.value.rotation_requested = true;
    store.put_keyset(&keyset)?;
    Ok(format!(
        "asked the agent of {cluster} to replace key {active}; it rotates after its next heartbeat\n"
    ))
}

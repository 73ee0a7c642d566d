//! Key rotation, for an agent that enrolled with a bootstrap token: every
//! `--rotate-key-every` (and when the hub's answer says an operator asked, with
//! `fleetpulse-hub key rotate`) the agent generates a new key, keeps it where its key lives
//! (staged next to the current one), and sends the hub a rotation signed with the current
//! key that carries the new public key and a proof of possession of it. Once the hub
//! accepts, the new key becomes the current one, on disk (or in the Secret) and for the
//! next heartbeat; the old key stays accepted by the hub for an overlap, then is retired.
//!
//! A crash between the hub's acceptance and the commit loses nothing: at start the agent
//! finds the staged key and sends the same rotation again (the hub answers as it did and
//! changes nothing), then commits. Keys listed in `spec.agent.publicKeys` are the spec's
//! to rotate: an agent without a bootstrap token never rotates.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ed25519_dalek::SigningKey;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use fleetpulse_common::protocol::keys;

use crate::key_secret::KEY_FIELD;

/// Default of `--rotate-key-every`: 30 days.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(30 * 24 * 3600);
/// After the hub refused a rotation, the next attempt waits this long (or the next request).
pub const AFTER_REFUSAL: Duration = Duration::from_secs(3600);
/// Data key of the staged key in the key Secret.
pub const NEXT_FIELD: &str = "next.pem";

/// Parses `--rotate-key-every`: `30d`, `12h`, `90m`..., or `0` (rotate only when the hub
/// asks).
pub fn parse_every(s: &str) -> Result<Duration, String> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if let Some(days) = s.strip_suffix('d')
        && let Ok(days) = days.parse::<u64>()
    {
        return Ok(Duration::from_secs(days.saturating_mul(24 * 3600)));
    }
    fleetpulse_common::duration::parse(s).map_err(|_| {
        format!("{s:?} is not a period; write e.g. 30d, 12h or 0 (only when the hub asks)")
    })
}

/// How an agent rotates its key.
#[derive(Clone, Debug)]
pub struct RotationSettings {
    /// Time between rotations (zero: only when the hub asks).
    pub every: Duration,
    /// Where the key lives.
    pub store: KeyStore,
}

/// Where the agent's key lives, and its staged successor during a rotation.
#[derive(Clone, Debug)]
pub enum KeyStore {
    /// `--key-file`; the staged key is `FILE.next`.
    File(PathBuf),
    /// The key Secret (`key.pem`; the staged key is `next.pem`).
    Secret(KeySecret),
}

/// The agent's key Secret in the managed cluster.
#[derive(Clone)]
pub struct KeySecret {
    /// Client of the managed cluster.
    pub client: kube::Client,
    /// The agent's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
}

impl std::fmt::Debug for KeySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret {}/{}", self.namespace, self.name)
    }
}

/// The key store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    /// A file operation failed.
    #[error("{path}: {source}; the agent needs to write next to its --key-file to rotate")]
    File {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The Secret could not be patched or read.
    #[error(
        "Secret {namespace}/{name}: {source}; the agent needs get and patch on its key Secret to rotate"
    )]
    Secret {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The staged key is unreadable.
    #[error("the staged key in {0} is unreadable: {1}; remove it and the agent stages a new one")]
    Staged(String, String),
}

impl KeyStore {
    /// Keeps `next` as the staged key (before the hub hears of it).
    pub async fn stage(&self, next: &SigningKey) -> Result<(), KeyStoreError> {
        match self {
            Self::File(path) => write_private(&staged_path(path), &keys::to_pem(next)),
            Self::Secret(secret) => secret.patch_data(json!({ NEXT_FIELD: pem(next) })).await,
        }
    }

    /// The staged key, if a rotation was interrupted.
    pub async fn staged(&self) -> Result<Option<SigningKey>, KeyStoreError> {
        let (pem, at) = match self {
            Self::File(path) => {
                let staged = staged_path(path);
                match std::fs::read_to_string(&staged) {
                    Ok(pem) => (pem, staged.display().to_string()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(source) => {
                        return Err(KeyStoreError::File {
                            path: staged,
                            source,
                        });
                    }
                }
            }
            Self::Secret(secret) => {
                let Some(bytes) = secret.staged().await? else {
                    return Ok(None);
                };
                let at = format!("{secret:?} {NEXT_FIELD}");
                let pem = String::from_utf8(bytes)
                    .map_err(|_| KeyStoreError::Staged(at.clone(), "not UTF-8".into()))?;
                (pem, at)
            }
        };
        keys::from_pem(&pem)
            .map(Some)
            .map_err(|e| KeyStoreError::Staged(at, e.to_string()))
    }

    /// Makes `key` the current key and drops the staged one.
    pub async fn commit(&self, key: &SigningKey) -> Result<(), KeyStoreError> {
        match self {
            Self::File(path) => {
                write_private(path, &keys::to_pem(key))?;
                let staged = staged_path(path);
                match std::fs::remove_file(&staged) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(source) => Err(KeyStoreError::File {
                        path: staged,
                        source,
                    }),
                }
            }
            Self::Secret(secret) => {
                let data = json!({ KEY_FIELD: pem(key), NEXT_FIELD: null });
                secret.patch_data(data).await
            }
        }
    }
}

impl KeySecret {
    fn api(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The staged key's PEM bytes, if any.
    async fn staged(&self) -> Result<Option<Vec<u8>>, KeyStoreError> {
        let secret = self
            .api()
            .get(&self.name)
            .await
            .map_err(|e| self.error(e))?;
        Ok(secret
            .data
            .and_then(|mut d| d.remove(NEXT_FIELD))
            .map(|b| b.0))
    }

    /// Merges `data` into the Secret's `data` (`null` removes an entry).
    async fn patch_data(&self, data: serde_json::Value) -> Result<(), KeyStoreError> {
        let patch = Patch::Merge(json!({ "data": data }));
        (self
            .api()
            .patch(&self.name, &PatchParams::default(), &patch)
            .await)
            .map(drop)
            .map_err(|e| self.error(e))
    }

    fn error(&self, source: kube::Error) -> KeyStoreError {
        KeyStoreError::Secret {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        }
    }
}

/// A key as Secret data (base64 of the PEM, as `data` holds it).
fn pem(key: &SigningKey) -> serde_json::Value {
    serde_json::to_value(ByteString(keys::to_pem(key).into_bytes()))
        .expect("bytes always serialize")
}

fn staged_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".next");
    PathBuf::from(name)
}

/// Writes `contents` to `path` readable by the owner only, through a temporary file renamed
/// into place, so a crash leaves the old file or the new one, never half of either.
fn write_private(path: &Path, contents: &str) -> Result<(), KeyStoreError> {
    use std::io::Write;
    let tmp = {
        let mut name = path.as_os_str().to_owned();
        name.push(".tmp");
        PathBuf::from(name)
    };
    let error = |source| KeyStoreError::File {
        path: path.to_owned(),
        source,
    };
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp).map_err(error)?;
    file.write_all(contents.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(error)?;
    std::fs::rename(&tmp, path).map_err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_store_stages_then_commits_leaving_only_the_new_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.pem");
        let old = keys::generate();
        std::fs::write(&path, keys::to_pem(&old)).unwrap();
        let store = KeyStore::File(path.clone());
        assert!(store.staged().await.unwrap().is_none());
        let next = keys::generate();
        store.stage(&next).await.unwrap();
        let staged = store.staged().await.unwrap().expect("a staged key");
        assert_eq!(staged.to_bytes(), next.to_bytes());
        let current = crate::keys::read_key_file(&path).unwrap();
        assert_eq!(
            current.to_bytes(),
            old.to_bytes(),
            "staging keeps the current key"
        );
        store.commit(&next).await.unwrap();
        let current = crate::keys::read_key_file(&path).unwrap();
        assert_eq!(current.to_bytes(), next.to_bytes());
        assert!(store.staged().await.unwrap().is_none());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[tokio::test]
    async fn a_secret_store_stages_then_commits_in_the_key_secret() {
        let sim = fleetpulse_kubesim::KubeSim::new();
        let ns: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(json!({"metadata": {"name": "fleetpulse-system"}})).unwrap();
        Api::all(sim.client())
            .create(&Default::default(), &ns)
            .await
            .unwrap();
        let (old, created) =
            crate::key_secret::load_or_create(sim.client(), "fleetpulse-system", "agent-key")
                .await
                .unwrap();
        assert!(created);
        let store = KeyStore::Secret(KeySecret {
            client: sim.client(),
            namespace: "fleetpulse-system".into(),
            name: "agent-key".into(),
        });
        let next = keys::generate();
        store.stage(&next).await.unwrap();
        assert_eq!(
            store.staged().await.unwrap().map(|k| k.to_bytes()),
            Some(next.to_bytes())
        );
        let read = |sim: &fleetpulse_kubesim::KubeSim| {
            crate::key_secret::read(sim.client(), "fleetpulse-system", "agent-key")
        };
        assert_eq!(read(&sim).await.unwrap().to_bytes(), old.to_bytes());
        store.commit(&next).await.unwrap();
        assert_eq!(read(&sim).await.unwrap().to_bytes(), next.to_bytes());
        assert!(store.staged().await.unwrap().is_none());
    }
}

//! An HTTP probe's request headers with their values resolved: inline values as written,
//! `valueFrom.secretKeyRef` ones read from a Secret in the agent's checks namespace when
//! the probe runs.
//!
//! [`SecretSource`] keeps each Secret it read for [`SECRET_TTL`], so a probe every second
//! costs one API call per Secret per TTL and a rotated value is sent within the TTL. A
//! Secret that is missing is not kept: the check fails with a message naming the Secret and
//! the key (never a value) and passes on its next run once the Secret exists. Only the
//! check that names the Secret fails; every other check runs as before.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use fleetpulse_common::api::check::{HttpHeader, SecretKeySelector};

use crate::checks::resources::{ReadError, Reader, ResourceReader};

/// How long a Secret read for a header is reused before it is read again.
pub const SECRET_TTL: Duration = Duration::from_secs(30);

/// The data of one Secret, by key.
pub type SecretData = BTreeMap<String, Vec<u8>>;

/// A request header, its value resolved.
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedHeader {
    /// Position in `httpHeaders`, for messages.
    pub index: usize,
    /// Header name.
    pub name: String,
    /// Header value.
    pub value: Vec<u8>,
}

impl std::fmt::Debug for ResolvedHeader {
    /// Shows the name, never the value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "httpHeaders[{}] {}", self.index, self.name)
    }
}

/// A header's value could not be resolved. Messages name the Secret and key, never a value.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// The Secret does not exist.
    #[error(
        "httpHeaders[{index}] ({header}): Secret {namespace}/{secret} not found; create it in the \
         agent's checks namespace or fix valueFrom.secretKeyRef.name"
    )]
    SecretNotFound {
        /// Position in `httpHeaders`.
        index: usize,
        /// Header name.
        header: String,
        /// Namespace the Secret was looked up in.
        namespace: String,
        /// Secret name.
        secret: String,
    },
    /// The Secret has no such key.
    #[error(
        "httpHeaders[{index}] ({header}): Secret {namespace}/{secret} has no key {key:?} (its keys: \
         {keys}); fix valueFrom.secretKeyRef.key"
    )]
    KeyNotFound {
        /// Position in `httpHeaders`.
        index: usize,
        /// Header name.
        header: String,
        /// Namespace of the Secret.
        namespace: String,
        /// Secret name.
        secret: String,
        /// The key asked for.
        key: String,
        /// The keys the Secret has, comma-separated.
        keys: String,
    },
    /// The Secret could not be read (API error, no permission, no API).
    #[error("httpHeaders[{index}] ({header}): {source}{hint}")]
    Read {
        /// Position in `httpHeaders`.
        index: usize,
        /// Header name.
        header: String,
        /// What the API said.
        #[source]
        source: ReadError,
        /// What to do about it, when known.
        hint: &'static str,
    },
}

struct Cached {
    read_at: Instant,
    data: Arc<SecretData>,
}

/// Where `valueFrom.secretKeyRef` values come from: Secrets in one namespace, read through
/// the agent's reader and kept for [`SECRET_TTL`]. Clones share the cache.
#[derive(Clone)]
pub struct SecretSource {
    reader: Reader,
    namespace: String,
    cache: Arc<Mutex<HashMap<String, Cached>>>,
}

impl SecretSource {
    /// Secrets of `namespace`, read through `reader`.
    pub fn new(reader: Reader, namespace: impl Into<String>) -> Self {
        Self {
            reader,
            namespace: namespace.into(),
            cache: Arc::default(),
        }
    }

    /// No Secrets: a header from a Secret fails, saying there is no Kubernetes API.
    pub fn none() -> Self {
        Self::new(Reader::None, "")
    }

    /// The namespace Secrets are read from.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    async fn secret(&self, name: &str) -> Result<Option<Arc<SecretData>>, ReadError> {
        let now = Instant::now();
        {
            let mut cache = self.cache.lock();
            cache.retain(|_, c| now.duration_since(c.read_at) < SECRET_TTL);
            if let Some(hit) = cache.get(name) {
                return Ok(Some(hit.data.clone()));
            }
        }
        let Some(data) = self.reader.secret(&self.namespace, name).await? else {
            return Ok(None);
        };
        let data = Arc::new(data);
        let cached = Cached {
            read_at: now,
            data: data.clone(),
        };
        self.cache.lock().insert(name.to_owned(), cached);
        Ok(Some(data))
    }

    /// Every header of `headers` with its value: inline, or from its Secret. A header whose
    /// optional Secret or key is missing is left out.
    pub async fn resolve(
        &self,
        headers: &[HttpHeader],
    ) -> Result<Vec<ResolvedHeader>, HeaderError> {
        let mut resolved = Vec::with_capacity(headers.len());
        for (index, header) in headers.iter().enumerate() {
            let value = match (&header.value, &header.value_from) {
                (Some(value), _) => Some(value.clone().into_bytes()),
                (None, Some(from)) => self.value_of(index, header, &from.secret_key_ref).await?,
                (None, None) => Some(Vec::new()),
            };
            if let Some(value) = value {
                let name = header.name.clone();
                resolved.push(ResolvedHeader { index, name, value });
            }
        }
        Ok(resolved)
    }

    async fn value_of(
        &self,
        index: usize,
        header: &HttpHeader,
        selector: &SecretKeySelector,
    ) -> Result<Option<Vec<u8>>, HeaderError> {
        let read = self.secret(&selector.name).await.map_err(|source| {
            let hint = match &source {
                ReadError::Api {
                    source: kube::Error::Api(e),
                    ..
                } if e.code == 403 => {
                    "; the agent may read only the Secrets listed in its chart's checks.secretNames"
                }
                _ => "",
            };
            HeaderError::Read {
                index,
                header: header.name.clone(),
                source,
                hint,
            }
        })?;
        let Some(data) = read else {
            if selector.optional {
                return Ok(None);
            }
            return Err(HeaderError::SecretNotFound {
                index,
                header: header.name.clone(),
                namespace: self.namespace.clone(),
                secret: selector.name.clone(),
            });
        };
        match data.get(&selector.key) {
            Some(value) => Ok(Some(value.clone())),
            None if selector.optional => Ok(None),
            None => Err(HeaderError::KeyNotFound {
                index,
                header: header.name.clone(),
                namespace: self.namespace.clone(),
                secret: selector.name.clone(),
                key: selector.key.clone(),
                keys: data.keys().cloned().collect::<Vec<_>>().join(", "),
            }),
        }
    }
}

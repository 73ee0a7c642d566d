//! Bootstrap tokens: `[a-z0-9]{6}.[a-z0-9]{16}`, an id (public, names the token in lists
//! and logs) and a secret (shown once, at creation). The hub keeps a [`TokenRecord`]: the
//! SHA-256 of the secret, never the secret, and what the token may enrol.
//!
//! The secret has 16 characters of 36 (about 82 bits), so a fast hash is enough: nobody can
//! search that space, and a stolen store reveals no usable token.

use std::fmt;

use rand::Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::protocol::errors::RejectCode;
use crate::protocol::report::ClusterId;

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
/// Length of a token id.
pub const ID_LEN: usize = 6;
/// Length of a token secret.
pub const SECRET_LEN: usize = 16;

/// A bootstrap token as handed to an operator.
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapToken {
    /// The public part.
    pub id: String,
    /// The secret part.
    pub secret: String,
}

/// A token string that is not `[a-z0-9]{6}.[a-z0-9]{16}`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "bootstrap token is not of the form abcdef.0123456789abcdef (6 and 16 characters of \
     a-z and 0-9); copy it again from `fleetpulse-hub token create`"
)]
pub struct TokenFormatError;

fn well_formed(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| ALPHABET.contains(&b))
}

impl BootstrapToken {
    /// A new token from the operating system's random source.
    pub fn generate() -> Self {
        let mut rng = rand::rngs::OsRng;
        let mut pick = |n: usize| -> String {
            (0..n)
                .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
                .collect()
        };
        BootstrapToken {
            id: pick(ID_LEN),
            secret: pick(SECRET_LEN),
        }
    }

    /// Parses `id.secret`.
    pub fn parse(s: &str) -> Result<Self, TokenFormatError> {
        let (id, secret) = s.trim().split_once('.').ok_or(TokenFormatError)?;
        if !well_formed(id, ID_LEN) || !well_formed(secret, SECRET_LEN) {
            return Err(TokenFormatError);
        }
        Ok(BootstrapToken {
            id: id.to_owned(),
            secret: secret.to_owned(),
        })
    }

    /// Whether `id` has the form of a token id.
    pub fn is_id(id: &str) -> bool {
        well_formed(id, ID_LEN)
    }
}

impl fmt::Display for BootstrapToken {
    /// The full token, secret included: print it only to the operator who created it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.id, self.secret)
    }
}

impl fmt::Debug for BootstrapToken {
    /// The id only, never the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BootstrapToken({}.<secret>)", self.id)
    }
}

/// The stored form of a secret: lowercase hex of its SHA-256.
pub fn hash_secret(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a token may enrol.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum TokenScope {
    /// Exactly this MemberCluster.
    Cluster {
        /// The cluster.
        cluster: ClusterId,
    },
    /// Any cluster in `namespace` whose name matches `name_pattern` (`*` matches any run
    /// of characters, everything else itself).
    Pattern {
        /// The namespace.
        namespace: String,
        /// The name pattern, e.g. `edge-*`.
        name_pattern: String,
    },
}

impl TokenScope {
    /// Whether the scope covers `cluster`.
    pub fn covers(&self, cluster: &ClusterId) -> bool {
        match self {
            TokenScope::Cluster { cluster: c } => c == cluster,
            TokenScope::Pattern {
                namespace,
                name_pattern,
            } => *namespace == cluster.namespace && glob(name_pattern, &cluster.name),
        }
    }
}

impl fmt::Display for TokenScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenScope::Cluster { cluster } => write!(f, "{cluster}"),
            TokenScope::Pattern {
                namespace,
                name_pattern,
            } => write!(f, "{namespace}/{name_pattern}"),
        }
    }
}

/// `*` matches any run of characters (including none); every other character itself.
fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let tail: Vec<&str> = parts.collect();
    let Some((last, middle)) = tail.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// How a registration made with a token becomes trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "camelCase")]
pub enum Approval {
    /// The key is trusted as soon as the registration passes.
    Auto,
    /// The key waits for `fleetpulse-hub approve NAMESPACE/NAME`.
    Manual,
}

/// What the hub keeps of a token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRecord {
    /// The token id.
    pub id: String,
    /// [`hash_secret`] of the secret.
    pub secret_sha256: String,
    /// What it may enrol.
    pub scope: TokenScope,
    /// Automatic or manual approval.
    pub approval: Approval,
    /// Created, seconds since the epoch.
    pub created_unix: i64,
    /// Expires, seconds since the epoch.
    pub expires_unix: i64,
    /// When it was used and by which cluster, once it was.
    pub used: Option<(i64, ClusterId)>,
    /// The key it enrolled, once used (so a registration interrupted between using the
    /// token and recording the key completes when the agent retries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Whether a registration may create its MemberCluster when there is none (Kubernetes
    /// mode).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub creates_cluster: bool,
    /// Revoked by an operator.
    pub revoked: bool,
}

/// Why a presented token was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TokenRejection {
    /// The stable code.
    pub code: RejectCode,
    /// What failed and what to do.
    pub message: String,
}

impl TokenRecord {
    /// A record of `token` for `scope`, valid for `ttl_secs` from `now_unix`.
    pub fn new(
        token: &BootstrapToken,
        scope: TokenScope,
        approval: Approval,
        now_unix: i64,
        ttl_secs: i64,
    ) -> Self {
        TokenRecord {
            id: token.id.clone(),
            secret_sha256: hash_secret(&token.secret),
            scope,
            approval,
            created_unix: now_unix,
            expires_unix: now_unix.saturating_add(ttl_secs),
            used: None,
            key_id: None,
            creates_cluster: false,
            revoked: false,
        }
    }

    /// Whether `secret` is this token's (constant time).
    pub fn secret_matches(&self, secret: &str) -> bool {
        hash_secret(secret)
            .as_bytes()
            .ct_eq(self.secret_sha256.as_bytes())
            .into()
    }

    /// Checks `secret` presented to enrol `cluster` at `now_unix`. The secret is checked
    /// first: without it nobody learns whether the token exists, expired or was used.
    pub fn admit(
        &self,
        secret: &str,
        cluster: &ClusterId,
        now_unix: i64,
    ) -> Result<(), TokenRejection> {
        let refuse = |code, message: String| Err(TokenRejection { code, message });
        if !self.secret_matches(secret) {
            return refuse(RejectCode::InvalidToken, invalid_token_message());
        }
        if self.revoked {
            return refuse(
                RejectCode::TokenRevoked,
                format!(
                    "bootstrap token {} was revoked; create a new one with `fleetpulse-hub \
                     token create --cluster {cluster}`",
                    self.id
                ),
            );
        }
        if let Some((_, by)) = &self.used {
            return refuse(
                RejectCode::TokenUsed,
                format!(
                    "bootstrap token {} was already used (by {by}); tokens are single-use: \
                     create a new one with `fleetpulse-hub token create --cluster {cluster}`",
                    self.id
                ),
            );
        }
        if now_unix >= self.expires_unix {
            return refuse(
                RejectCode::TokenExpired,
                format!(
                    "bootstrap token {} expired {}s ago; create a new one with \
                     `fleetpulse-hub token create --cluster {cluster}`",
                    self.id,
                    now_unix - self.expires_unix
                ),
            );
        }
        if !self.scope.covers(cluster) {
            return refuse(
                RejectCode::TokenNotForCluster,
                format!(
                    "bootstrap token {} enrols {}, not {cluster}; fix the agent's --cluster \
                     or create a token for {cluster}",
                    self.id, self.scope
                ),
            );
        }
        Ok(())
    }
}

/// The message for an unknown token id or a wrong secret (one message for both).
pub fn invalid_token_message() -> String {
    "no bootstrap token with this id and secret on this hub; check the token, or create one \
     with `fleetpulse-hub token create`"
        .to_owned()
}

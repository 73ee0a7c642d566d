//! The admin listener's bearer token from a file: kept only as its SHA-256 digest, and
//! compared with what a caller sends in constant time (digests of equal length, so neither
//! the content nor the length leaks through timing). Neither token is ever logged or
//! echoed.
//!
//! The file is read at start (a missing or empty one stops the hub) and again when it
//! changes (its inode, size or modification time), looked at no more than once a second:
//! a token Secret mounted as a volume is rotated without a restart. A change that cannot
//! be used (the file unreadable or empty, as for a moment while a volume is updated) keeps
//! the token in effect and is logged once.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use fleetpulse_common::protocol::errors::RejectCode;

use crate::refusal::Refusal;

/// The token file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// It could not be read.
    #[error("cannot read the admin token file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// It holds nothing but whitespace.
    #[error(
        "the admin token file {path} is empty: write a long random token into it, e.g. \
         `head -c 32 /dev/urandom | base64 > {path}`"
    )]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// How often, at most, the file is looked at for a change.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// The expected token, as its digest, and the file it comes from.
pub(crate) struct Token {
    path: PathBuf,
    recheck: Duration,
    current: Mutex<Current>,
}

/// The token in effect and the version of the file it was read from.
struct Current {
    digest: [u8; 32],
    version: Option<Version>,
    looked: Instant,
}

/// What tells one content of the file from the next without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Version {
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

fn version(path: &Path) -> Option<Version> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Version {
        inode: meta.ino(),
        len: meta.len(),
        modified: meta.modified().ok(),
    })
}

/// The digest of the token in `path` (surrounding whitespace, e.g. a final newline, ignored).
fn digest_of(path: &Path) -> Result<[u8; 32], TokenError> {
    let text = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
        path: path.to_owned(),
        source,
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(TokenError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(Sha256::digest(token.as_bytes()).into())
}

impl Token {
    /// Reads the token from `path`, to be read again when the file changes.
    pub(crate) fn read(path: &Path) -> Result<Token, TokenError> {
        Token::read_every(path, RECHECK)
    }

    /// [`Token::read`], looking at the file for a change at most every `recheck`.
    pub(crate) fn read_every(path: &Path, recheck: Duration) -> Result<Token, TokenError> {
        let version = version(path);
        let digest = digest_of(path)?;
        Ok(Token {
            path: path.to_owned(),
            recheck,
            current: Mutex::new(Current {
                digest,
                version,
                looked: Instant::now(),
            }),
        })
    }

    /// The token in effect, read again first if the file changed since it was last read.
    fn digest(&self) -> [u8; 32] {
        let mut current = self.current.lock();
        if current.looked.elapsed() < self.recheck {
            return current.digest;
        }
        current.looked = Instant::now();
        let now = version(&self.path);
        if now == current.version {
            return current.digest;
        }
        current.version = now;
        let path = self.path.display();
        match digest_of(&self.path) {
            Ok(digest) => {
                if digest != current.digest {
                    tracing::info!(%path, "admin token file changed: its new token is in effect");
                }
                current.digest = digest;
            }
            Err(e) => tracing::error!(
                %path, error = %e,
                "admin token file changed but cannot be used; the token read before stays in effect"
            ),
        }
        current.digest
    }

    /// Accepts exactly the configured token.
    pub(crate) fn check(&self, presented: &str) -> Result<(), Refusal> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        if bool::from(self.digest().ct_eq(&digest)) {
            Ok(())
        } else {
            Err(Refusal::new(
                RejectCode::Unauthenticated,
                "the bearer token is not this hub's admin token (the content of its \
                 --admin-token-file): check the token file you pass to --token-file",
            ))
        }
    }
}

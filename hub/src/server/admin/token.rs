//! The admin listener's bearer token from a file: read once at start, kept only as its
//! SHA-256 digest, and compared with what a caller sends in constant time (digests of
//! equal length, so neither the content nor the length leaks through timing). Neither
//! token is ever logged or echoed.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use fleetpulse_common::protocol::errors::RejectCode;

use crate::admission::Refusal;

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

/// The expected token, as its digest.
pub(crate) struct Token {
    digest: [u8; 32],
}

impl Token {
    /// Reads the token from `path` (surrounding whitespace, e.g. a final newline, ignored).
    pub(crate) fn read(path: &Path) -> Result<Token, TokenError> {
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
        Ok(Token {
            digest: Sha256::digest(token.as_bytes()).into(),
        })
    }

    /// Accepts exactly the configured token.
    pub(crate) fn check(&self, presented: &str) -> Result<(), Refusal> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        if bool::from(self.digest.ct_eq(&digest)) {
            Ok(())
        } else {
            Err(Refusal::new(
                RejectCode::Unauthenticated,
                "the bearer token is not the admin token this hub was started with \
                 (--admin-token-file): check the token file you pass to --token-file",
            ))
        }
    }
}

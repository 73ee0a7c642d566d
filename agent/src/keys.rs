//! The agent's private key on disk: `keygen` writes a new one (PKCS#8 PEM, mode 0600)
//! and tells the operator what to put on the hub; `run` reads it.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use fleetpulse_common::protocol::keys::{self, KeyError, KeyId};

/// Why a key file could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// `keygen` would overwrite an existing file.
    #[error(
        "{path} already exists; refusing to overwrite a key (the hub may trust it). Pass \
         --force to replace it, then update spec.agent.publicKeys on the hub"
    )]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// The key file could not be written.
    #[error("cannot write the private key to {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The key file could not be read.
    #[error(
        "cannot read the agent's private key {path} (--key-file): {source}; create one with \
         `fleetpulse-agent keygen --out {path}` or mount the key Secret at that path"
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The key file does not hold an Ed25519 PKCS#8 PEM key.
    #[error(
        "{path} (--key-file) does not hold the agent's key: {source}; generate one with \
         `fleetpulse-agent keygen`"
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        #[source]
        source: KeyError,
    },
}

/// A key `keygen` wrote, and what the operator needs to know about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedKey {
    /// Where the private key was written.
    pub path: PathBuf,
    /// The public key, base64url as in `spec.agent.publicKeys[].publicKey`.
    pub public_key: String,
    /// The key id (RFC 7638 thumbprint), as the hub shows it.
    pub key_id: String,
}

impl GeneratedKey {
    /// What `keygen` prints: the public key, the key id and a MemberCluster snippet.
    pub fn instructions(&self) -> String {
        format!(
            "private key: {path}\npublic key:  {pk}\nkey id:      {kid}\n\n\
             Add the public key to the cluster's MemberCluster on the hub:\n\n\
             spec:\n  agent:\n    publicKeys:\n      - publicKey: {pk}\n",
            path = self.path.display(),
            pk = self.public_key,
            kid = self.key_id,
        )
    }
}

/// Generates an Ed25519 key and writes it to `path` as PKCS#8 PEM, readable only by the
/// owner. Refuses to replace an existing file unless `force`.
pub fn generate_key_file(path: &Path, force: bool) -> Result<GeneratedKey, KeyFileError> {
    let key = keys::generate();
    let write_err = |source| KeyFileError::Write {
        path: path.to_owned(),
        source,
    };
    if force {
        // Remove rather than truncate, so the new file gets mode 0600 whatever the old had.
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(write_err(e)),
        }
    }
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => KeyFileError::Exists {
            path: path.to_owned(),
        },
        _ => write_err(e),
    })?;
    file.write_all(keys::to_pem(&key).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(write_err)?;
    let public = key.verifying_key();
    Ok(GeneratedKey {
        path: path.to_owned(),
        public_key: keys::public_key_string(&public),
        key_id: KeyId::of(&public).0,
    })
}

/// Reads the agent's private key (PKCS#8 PEM) from `path`.
pub fn read_key_file(path: &Path) -> Result<SigningKey, KeyFileError> {
    let pem = std::fs::read_to_string(path).map_err(|source| KeyFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    keys::from_pem(&pem).map_err(|source| KeyFileError::Parse {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keygen_writes_a_readable_owner_only_key_and_prints_its_public_half() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.pem");
        let generated = generate_key_file(&path, false).unwrap();
        let key = read_key_file(&path).unwrap();
        assert_eq!(
            generated.public_key,
            keys::public_key_string(&key.verifying_key())
        );
        assert_eq!(generated.key_id, KeyId::of(&key.verifying_key()).0);
        let text = generated.instructions();
        assert!(text.contains(&generated.key_id));
        let snippet = format!(
            "spec:\n  agent:\n    publicKeys:\n      - publicKey: {}\n",
            generated.public_key
        );
        assert!(text.ends_with(&snippet), "{text}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn keygen_refuses_to_overwrite_an_existing_file_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.pem");
        std::fs::write(&path, "precious").unwrap();
        let err = generate_key_file(&path, false).unwrap_err();
        assert!(matches!(err, KeyFileError::Exists { .. }));
        assert!(err.to_string().contains("--force"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");

        let generated = generate_key_file(&path, true).unwrap();
        let key = read_key_file(&path).unwrap();
        assert_eq!(
            generated.public_key,
            keys::public_key_string(&key.verifying_key())
        );
    }

    #[test]
    fn unreadable_or_malformed_key_files_name_the_file_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = read_key_file(&missing).unwrap_err().to_string();
        assert!(
            err.contains("missing.pem") && err.contains("keygen"),
            "{err}"
        );

        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "hello").unwrap();
        let err = read_key_file(&garbage).unwrap_err();
        assert!(matches!(err, KeyFileError::Parse { .. }));
        assert!(err.to_string().contains("garbage.pem"), "{err}");
    }
}

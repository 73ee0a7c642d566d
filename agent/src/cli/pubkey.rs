//! `pubkey`: prints the public key of the agent's private key, from its key file or from
//! the Secret the agent keeps it in, as `spec.agent.publicKeys[].publicKey` wants it.

use std::path::PathBuf;

use clap::Args;
use fleetpulse_common::protocol::keys::{self, KeyId};
use fleetpulse_common::protocol::report::ClusterId;

use crate::checks::resources::Reader;
use crate::{key_secret, keys as key_file};

/// Flags of `pubkey`.
#[derive(Debug, Args)]
pub struct PubkeyArgs {
    /// The private key file (from `fleetpulse-agent keygen`).
    #[arg(
        long,
        value_name = "FILE",
        env = "FLEETPULSE_KEY_FILE",
        required_unless_present = "from_secret",
        conflicts_with = "from_secret"
    )]
    pub key_file: Option<PathBuf>,
    /// The Secret the agent keeps its key in (Kubernetes mode), as NAMESPACE/NAME, e.g.
    /// `fleetpulse-system/fleetpulse-agent-key`. Read with --kubeconfig, else as kubectl
    /// does, else with the in-cluster service account.
    #[arg(long, value_name = "NAMESPACE/NAME", env = "FLEETPULSE_PUBKEY_FROM_SECRET",
          value_parser = ClusterId::parse)]
    pub from_secret: Option<ClusterId>,
    /// Kubeconfig for --from-secret.
    #[arg(
        long,
        value_name = "FILE",
        env = "FLEETPULSE_KUBECONFIG",
        requires = "from_secret"
    )]
    pub kubeconfig: Option<PathBuf>,
    /// Print a MemberCluster `spec.agent.publicKeys` snippet (and the key id) instead of
    /// the bare key.
    #[arg(long, env = "FLEETPULSE_PUBKEY_YAML")]
    pub yaml: bool,
}

/// What `pubkey` prints for `key`.
pub fn render(key: &ed25519_dalek::VerifyingKey, yaml: bool) -> String {
    let public = keys::public_key_string(key);
    if yaml {
        format!(
            "# key id {}\nspec:\n  agent:\n    publicKeys:\n      - publicKey: {public}\n",
            KeyId::of(key)
        )
    } else {
        format!("{public}\n")
    }
}

/// Runs `pubkey`.
pub async fn run(args: PubkeyArgs) -> anyhow::Result<String> {
    let key = match (&args.key_file, &args.from_secret) {
        (Some(file), _) => key_file::read_key_file(file)?,
        (None, Some(secret)) => {
            let Reader::Kube(kube) = super::kube_client::reader(args.kubeconfig.as_deref()).await?
            else {
                anyhow::bail!(
                    "--from-secret {secret} needs a Kubernetes API: pass --kubeconfig, set \
                     $KUBECONFIG, or run it inside the agent's pod"
                );
            };
            key_secret::read(kube.client().clone(), &secret.namespace, &secret.name).await?
        }
        (None, None) => anyhow::bail!("pass --key-file FILE or --from-secret NAMESPACE/NAME"),
    };
    Ok(render(&key.verifying_key(), args.yaml))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pubkey_prints_the_key_keygen_printed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.pem");
        let generated = key_file::generate_key_file(&path, false).unwrap();
        let args = |yaml| PubkeyArgs {
            key_file: Some(path.clone()),
            from_secret: None,
            kubeconfig: None,
            yaml,
        };
        assert_eq!(
            run(args(false)).await.unwrap(),
            format!("{}\n", generated.public_key)
        );
        let yaml = run(args(true)).await.unwrap();
        assert!(yaml.contains(&generated.key_id), "{yaml}");
        assert!(
            yaml.ends_with(&format!("- publicKey: {}\n", generated.public_key)),
            "{yaml}"
        );
    }
}

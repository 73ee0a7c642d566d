//! Connecting to the managed cluster's API the way every Kubernetes tool does: `--kubeconfig`,
//! else `$KUBECONFIG` (every file it lists, merged) or `~/.kube/config`, else the in-cluster
//! service account, else none (the agent then runs only checks that need no API).

use std::path::Path;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::checks::resources::{KubeReader, Reader};

/// The reader for `run`.
pub async fn reader(kubeconfig: Option<&Path>) -> anyhow::Result<Reader> {
    let options = KubeConfigOptions::default();
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .with_context(|| format!("kubeconfig {} is not usable", path.display()))?
        }
        None => match (Kubeconfig::read(), std::env::var_os("KUBECONFIG")) {
            (Ok(kc), from_env) => {
                let source = from_env.map_or_else(
                    || "~/.kube/config".to_owned(),
                    |v| format!("$KUBECONFIG ({})", v.to_string_lossy()),
                );
                kube::Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .with_context(|| format!("the kubeconfig from {source} is not usable"))?
            }
            // A $KUBECONFIG that cannot be read is a mistake to report, not to skip.
            (Err(e), Some(path)) => {
                return Err(e).with_context(|| {
                    format!(
                        "cannot read $KUBECONFIG ({}); fix or unset it, or pass --kubeconfig",
                        path.to_string_lossy()
                    )
                });
            }
            (Err(_), None) if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => {
                kube::Config::incluster().context("cannot use the in-cluster service account")?
            }
            (Err(_), None) => {
                tracing::warn!(
                    "no --kubeconfig, no $KUBECONFIG or ~/.kube/config, and not running in a \
                     cluster: only HTTP/TCP probes can run; resource checks and built-ins will \
                     report that there is no Kubernetes API"
                );
                return Ok(Reader::None);
            }
        },
    };
    let client = kube::Client::try_from(config).context("cannot build a Kubernetes client")?;
    Ok(Reader::Kube(KubeReader::new(client)))
}

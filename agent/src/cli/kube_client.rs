//! Connecting to the managed cluster's API: a given kubeconfig, else the in-cluster
//! service account, else none (the agent then runs only checks that need no API).

use std::path::Path;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::checks::resources::{KubeReader, Reader};

/// The reader for `run`.
pub async fn reader(kubeconfig: Option<&Path>) -> anyhow::Result<Reader> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("kubeconfig {} is not usable", path.display()))?
        }
        None if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => {
            kube::Config::incluster().context("cannot use the in-cluster service account")?
        }
        None => {
            tracing::warn!(
                "no --kubeconfig and not running in a cluster: only HTTP/TCP probes can run; \
                 resource checks and built-ins will report that there is no Kubernetes API"
            );
            return Ok(Reader::None);
        }
    };
    let client = kube::Client::try_from(config).context("cannot build a Kubernetes client")?;
    Ok(Reader::Kube(KubeReader::new(client)))
}

//! Hub-wide mirror settings, as `serve` flags: defaults so a fleet does not repeat the
//! same mirror in every MemberCluster, the kubeconfig of the cluster mirrors live on in
//! embedded mode, and the resync interval.
//!
//! `--mirror-default KIND[:OPTION=VALUE,...]` (repeatable; in the environment, `;`
//! between entries), `KIND` one of `sveltoscluster`, `capi-cluster`, `argocd-secret`,
//! `ocm-managedcluster`, `karmada-cluster`, `kubefleet-membercluster`. By default the
//! object has the MemberCluster's name (and, for namespaced kinds, its namespace). Options:
//! `namespace=NS` (the object's namespace, e.g. `argocd`), `name-label=KEY` (the object is
//! named by the value of the MemberCluster's label `KEY`), `taint-effect=NoExecute`
//! (`karmada-cluster` only). A MemberCluster that lists a mirror of the same kind in
//! `spec.mirrors` overrides the default for that kind.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use fleetpulse_common::api::{MemberCluster, MirrorRef, MirrorTaintEffect};

use super::kind::{self, MirrorKind};

/// The `serve` flags for mirrors (flattened into `serve`).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct MirrorArgs {
    /// A mirror every MemberCluster gets unless its spec.mirrors names one of the same kind:
    /// KIND[:namespace=NS,name-label=KEY,taint-effect=NoExecute], e.g. `sveltoscluster` or
    /// `argocd-secret:namespace=argocd,name-label=argocd.example.com/secret`. Repeatable.
    #[arg(
        long = "mirror-default",
        env = "FLEETPULSE_MIRROR_DEFAULTS",
        value_delimiter = ';',
        value_parser = DefaultMirror::parse
    )]
    pub mirror_defaults: Vec<DefaultMirror>,
    /// The kubeconfig of the cluster the mirror objects live on (e.g. an Argo CD or Sveltos
    /// management cluster). Default: in Kubernetes mode the hub's own cluster; an embedded
    /// hub without it only shows what it would write.
    #[arg(long, env = "FLEETPULSE_MIRROR_KUBECONFIG")]
    pub mirror_kubeconfig: Option<PathBuf>,
    /// Seconds between re-reads of each mirror object, to restore labels or a taint someone
    /// removed and to write a mirror object created since (missing objects are retried
    /// sooner, with backoff).
    #[arg(
        long,
        env = "FLEETPULSE_MIRROR_RESYNC_SECONDS",
        default_value_t = 300,
        value_parser = clap::value_parser!(u64).range(5..=86400)
    )]
    pub mirror_resync_seconds: u64,
}

impl MirrorArgs {
    /// The resync interval.
    pub fn resync(&self) -> Duration {
        Duration::from_secs(self.mirror_resync_seconds.max(5))
    }

    /// Every mirror of `cluster`: its `spec.mirrors`, then each default of a kind it does
    /// not list. A default that cannot be resolved (its name label is missing) is returned
    /// as a problem naming the label and the fix, instead of being skipped silently.
    pub fn mirrors_of(&self, cluster: &MemberCluster) -> (Vec<MirrorRef>, Vec<String>) {
        let mut mirrors = cluster.spec.mirrors.clone();
        let mut problems = Vec::new();
        let listed: Vec<(String, String)> = mirrors
            .iter()
            .map(|m| (m.api_version.clone(), m.kind.clone()))
            .collect();
        for default in &self.mirror_defaults {
            let k = default.kind;
            if listed.contains(&(k.api_version().to_owned(), k.kind().to_owned())) {
                continue;
            }
            match default.resolve(cluster) {
                Ok(m) => mirrors.push(m),
                Err(p) => problems.push(p),
            }
        }
        (mirrors, problems)
    }
}

/// One `--mirror-default`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefaultMirror {
    /// The kind of object.
    pub kind: MirrorKind,
    /// Its namespace (default: the MemberCluster's).
    pub namespace: Option<String>,
    /// The MemberCluster label whose value names the object (default: the MemberCluster's
    /// name).
    pub name_label: Option<String>,
    /// Karmada only: the taint effect.
    pub taint_effect: Option<MirrorTaintEffect>,
}

impl DefaultMirror {
    /// Parses `KIND[:OPTION=VALUE,...]`; the error lists what is accepted.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (name, options) = s.split_once(':').unwrap_or((s, ""));
        let kind = MirrorKind::from_short_name(name.trim()).ok_or_else(|| {
            let known: Vec<&str> = kind::ALL.iter().map(|k| k.short_name()).collect();
            format!(
                "unknown mirror kind {name:?}; use one of {}",
                known.join(", ")
            )
        })?;
        let mut out = Self {
            kind,
            namespace: None,
            name_label: None,
            taint_effect: None,
        };
        let options: BTreeMap<&str, &str> = options
            .split(',')
            .filter(|o| !o.trim().is_empty())
            .map(|o| o.split_once('=').ok_or(o))
            .collect::<Result<_, _>>()
            .map_err(|o| format!("{o:?} in {s:?} is not OPTION=VALUE"))?;
        for (key, value) in options {
            match (key.trim(), value.trim()) {
                ("namespace", ns) if kind.namespaced() && !ns.is_empty() => {
                    out.namespace = Some(ns.to_owned());
                }
                ("namespace", _) => {
                    return Err(format!(
                        "{name} objects are cluster-scoped: drop namespace="
                    ));
                }
                ("name-label", label) if !label.is_empty() => {
                    out.name_label = Some(label.to_owned());
                }
                ("taint-effect", effect) if kind == MirrorKind::KarmadaCluster => {
                    out.taint_effect = Some(match effect {
                        "NoSchedule" => MirrorTaintEffect::NoSchedule,
                        "NoExecute" => MirrorTaintEffect::NoExecute,
                        other => {
                            return Err(format!(
                                "taint-effect {other:?}: use NoSchedule or NoExecute"
                            ));
                        }
                    });
                }
                ("taint-effect", _) => {
                    return Err("taint-effect applies to karmada-cluster only".to_owned());
                }
                (other, _) => {
                    return Err(format!(
                        "unknown option {other:?} in {s:?}; use namespace=, name-label= or taint-effect="
                    ));
                }
            }
        }
        Ok(out)
    }

    /// The reference this default gives `cluster`.
    pub fn resolve(&self, cluster: &MemberCluster) -> Result<MirrorRef, String> {
        let name = match &self.name_label {
            None => cluster.metadata.name.clone().unwrap_or_default(),
            Some(label) => cluster
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(label))
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "MemberCluster {} has no label {label:?}, which names its {} (--mirror-default {}); add the label or list the mirror in spec.mirrors",
                        cluster.key(),
                        self.kind.kind(),
                        self.kind.short_name()
                    )
                })?,
        };
        let mut mirror = MirrorRef::new(self.kind.api_version(), self.kind.kind(), &name);
        mirror.namespace = self.namespace.clone();
        mirror.taint_effect = self.taint_effect;
        Ok(mirror)
    }
}

#[cfg(test)]
mod tests;

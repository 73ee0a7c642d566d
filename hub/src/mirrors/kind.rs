//! The kinds the hub can mirror onto, by `apiVersion` and `kind`: where each lives (scope,
//! plural) and how its tool reads a taint, if it does.

use fleetpulse_common::api::{MirrorRef, MirrorTaintEffect};

/// A kind of object fleetpulse knows how to keep labels (and a taint) on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MirrorKind {
    /// Sveltos `lib.projectsveltos.io/v1beta1` SveltosCluster (namespaced; labels).
    SveltosCluster,
    /// Cluster API `cluster.x-k8s.io/v1beta1` Cluster (namespaced; labels).
    CapiCluster,
    /// An Argo CD cluster Secret, core `v1` Secret (namespaced; labels).
    ArgoCdSecret,
    /// Open Cluster Management `cluster.open-cluster-management.io/v1` ManagedCluster
    /// (cluster-scoped; labels and a `NoSelect` taint).
    OcmManagedCluster,
    /// Karmada `cluster.karmada.io/v1alpha1` Cluster (cluster-scoped; labels and a
    /// `NoSchedule` or `NoExecute` taint).
    KarmadaCluster,
    /// KubeFleet `cluster.kubernetes-fleet.io/v1beta1` MemberCluster (cluster-scoped;
    /// labels and a `NoSchedule` taint).
    KubeFleetMemberCluster,
}

/// Every supported kind, in a stable order.
pub const ALL: [MirrorKind; 6] = [
    MirrorKind::SveltosCluster,
    MirrorKind::CapiCluster,
    MirrorKind::ArgoCdSecret,
    MirrorKind::OcmManagedCluster,
    MirrorKind::KarmadaCluster,
    MirrorKind::KubeFleetMemberCluster,
];

impl MirrorKind {
    /// The kind a reference names, if fleetpulse supports it.
    pub fn of(mirror: &MirrorRef) -> Option<Self> {
        ALL.into_iter()
            .find(|k| k.api_version() == mirror.api_version && k.kind() == mirror.kind)
    }

    /// `apiVersion` of the objects.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::SveltosCluster => "lib.projectsveltos.io/v1beta1",
            Self::CapiCluster => "cluster.x-k8s.io/v1beta1",
            Self::ArgoCdSecret => "v1",
            Self::OcmManagedCluster => "cluster.open-cluster-management.io/v1",
            Self::KarmadaCluster => "cluster.karmada.io/v1alpha1",
            Self::KubeFleetMemberCluster => "cluster.kubernetes-fleet.io/v1beta1",
        }
    }

    /// `kind` of the objects.
    pub fn kind(self) -> &'static str {
        match self {
            Self::SveltosCluster => "SveltosCluster",
            Self::CapiCluster | Self::KarmadaCluster => "Cluster",
            Self::ArgoCdSecret => "Secret",
            Self::OcmManagedCluster => "ManagedCluster",
            Self::KubeFleetMemberCluster => "MemberCluster",
        }
    }

    /// The resource (plural) the API serves them under.
    pub fn plural(self) -> &'static str {
        match self {
            Self::SveltosCluster => "sveltosclusters",
            Self::CapiCluster | Self::KarmadaCluster => "clusters",
            Self::ArgoCdSecret => "secrets",
            Self::OcmManagedCluster => "managedclusters",
            Self::KubeFleetMemberCluster => "memberclusters",
        }
    }

    /// The API group (empty for core).
    pub fn group(self) -> &'static str {
        self.api_version()
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// Whether the objects live in a namespace.
    pub fn namespaced(self) -> bool {
        matches!(
            self,
            Self::SveltosCluster | Self::CapiCluster | Self::ArgoCdSecret
        )
    }

    /// The effect of fleetpulse's taint while the cluster is not Healthy, or `None` for
    /// kinds whose tool does not schedule by taints (labels only). Only Karmada lets the
    /// reference choose.
    pub fn taint_effect(self, chosen: Option<MirrorTaintEffect>) -> Option<&'static str> {
        match self {
            Self::OcmManagedCluster => Some("NoSelect"),
            Self::KarmadaCluster => Some(chosen.unwrap_or_default().as_str()),
            Self::KubeFleetMemberCluster => Some("NoSchedule"),
            Self::SveltosCluster | Self::CapiCluster | Self::ArgoCdSecret => None,
        }
    }

    /// Whether the tool's taint carries `timeAdded` (OCM's and Kubernetes' Taint do;
    /// KubeFleet's has key, value and effect only).
    pub fn taint_has_time_added(self) -> bool {
        matches!(self, Self::OcmManagedCluster | Self::KarmadaCluster)
    }

    /// The name used on the command line and in chart values.
    pub fn short_name(self) -> &'static str {
        match self {
            Self::SveltosCluster => "sveltoscluster",
            Self::CapiCluster => "capi-cluster",
            Self::ArgoCdSecret => "argocd-secret",
            Self::OcmManagedCluster => "ocm-managedcluster",
            Self::KarmadaCluster => "karmada-cluster",
            Self::KubeFleetMemberCluster => "kubefleet-membercluster",
        }
    }

    /// The kind named `short` on the command line.
    pub fn from_short_name(short: &str) -> Option<Self> {
        ALL.into_iter().find(|k| k.short_name() == short)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_reference_and_short_name() {
        for kind in ALL {
            let r = MirrorRef::new(kind.api_version(), kind.kind(), "x");
            assert_eq!(MirrorKind::of(&r), Some(kind));
            assert_eq!(MirrorKind::from_short_name(kind.short_name()), Some(kind));
        }
        let capi_v1alpha = MirrorRef::new("cluster.x-k8s.io/v1alpha3", "Cluster", "x");
        assert_eq!(MirrorKind::of(&capi_v1alpha), None);
        assert_eq!(MirrorKind::ArgoCdSecret.group(), "");
    }

    #[test]
    fn only_taint_scheduled_kinds_get_a_taint_and_only_karmada_may_choose_it() {
        use MirrorTaintEffect::NoExecute;
        assert_eq!(
            MirrorKind::KarmadaCluster.taint_effect(None),
            Some("NoSchedule")
        );
        assert_eq!(
            MirrorKind::KarmadaCluster.taint_effect(Some(NoExecute)),
            Some("NoExecute")
        );
        assert_eq!(
            MirrorKind::OcmManagedCluster.taint_effect(Some(NoExecute)),
            Some("NoSelect")
        );
        assert_eq!(
            MirrorKind::KubeFleetMemberCluster.taint_effect(None),
            Some("NoSchedule")
        );
        assert_eq!(MirrorKind::SveltosCluster.taint_effect(None), None);
        assert_eq!(MirrorKind::ArgoCdSecret.taint_effect(None), None);
    }
}

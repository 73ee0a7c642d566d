//! The identities every part of the hub shares: decisions, stores, Events and metrics
//! import them from here.

use fleetpulse_common::api::{ClusterSet, MemberCluster, Set, membership_label_key};

pub use fleetpulse_common::protocol::report::ClusterId;

/// The id of a MemberCluster (`default` namespace when unset).
pub fn cluster_id(mc: &MemberCluster) -> ClusterId {
    ClusterId::new(
        mc.metadata.namespace.as_deref().unwrap_or("default"),
        mc.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// Identifies a ClusterSet (by name) or a Set (by namespace/name).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SetKey {
    /// A ClusterSet.
    ClusterSet(String),
    /// A Set.
    Set(ClusterId),
}

impl SetKey {
    /// The key of a ClusterSet.
    pub fn of_cluster_set(cs: &ClusterSet) -> Self {
        SetKey::ClusterSet(cs.metadata.name.clone().unwrap_or_default())
    }

    /// The key of a Set (namespace `default` when unset).
    pub fn of_set(set: &Set) -> Self {
        SetKey::Set(Self::set_id(set))
    }

    /// A Set's namespace (`default` when unset) and name.
    pub fn set_id(set: &Set) -> ClusterId {
        ClusterId::new(
            set.metadata.namespace.as_deref().unwrap_or("default"),
            set.metadata.name.as_deref().unwrap_or_default(),
        )
    }

    /// Which clusters the set may see.
    pub fn scope(&self) -> Scope<'_> {
        match self {
            SetKey::ClusterSet(_) => Scope::Fleet,
            SetKey::Set(id) => Scope::Namespace(&id.namespace),
        }
    }

    /// The membership label this set publishes on its selected clusters.
    pub fn label_key(&self) -> String {
        match self {
            SetKey::ClusterSet(name) => membership_label_key(true, name),
            SetKey::Set(id) => membership_label_key(false, &id.name),
        }
    }
}

impl std::fmt::Display for SetKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetKey::ClusterSet(name) => write!(f, "ClusterSet {name}"),
            SetKey::Set(id) => write!(f, "Set {id}"),
        }
    }
}

/// Which clusters a set may see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    /// A ClusterSet: every namespace.
    Fleet,
    /// A Set: only its namespace.
    Namespace(&'a str),
}

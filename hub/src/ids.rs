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

/// Which of `shards` shards `id` falls in: FNV-1a (64-bit) of `namespace/name`, modulo
/// `shards`. Stable across processes, versions and platforms, so every replica and every
/// release maps a cluster to the same shard.
pub fn shard_of(id: &ClusterId, shards: u32) -> u32 {
    let bytes = (id.namespace.bytes())
        .chain(std::iter::once(b'/'))
        .chain(id.name.bytes());
    (fnv1a(bytes) % u64::from(shards.max(1))) as u32
}

/// The 64-bit FNV-1a hash of `bytes`.
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    (bytes.into_iter()).fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clusters_shard_is_fnv1a_of_its_name_and_spreads_the_fleet() {
        // The published FNV-1a test vectors: no release may move a cluster's shard.
        assert_eq!(fnv1a(*b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(*b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(*b"foobar"), 0x8594_4171_f739_67e8);
        let id = ClusterId::new("fleet", "edge-1");
        let hash = fnv1a(*b"fleet/edge-1");
        assert_eq!(shard_of(&id, 1 << 20), (hash % (1 << 20)) as u32);
        assert_eq!(shard_of(&id, 1), 0);
        assert_eq!(shard_of(&id, 0), 0, "no shards counts as one");
        let mut counts = [0u32; 8];
        for i in 0..8000 {
            counts[shard_of(&ClusterId::new("fleet", format!("c{i}")), 8) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&n| (800..1200).contains(&n)),
            "{counts:?}"
        );
    }
}

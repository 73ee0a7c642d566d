//! Shards of the fleet shared between hub replicas: every cluster falls in one of a fixed
//! number of shards ([`crate::ids::shard_of`]), and each shard is owned by one replica
//! through a Lease of its own, `fleetpulse-shard-K`. This module holds what every
//! replica must agree on (the Lease names, the settings) and the pure balancer
//! ([`balance`]) that decides which shards this replica should take, keep, give up or
//! ask for, given the Leases it sees. The Lease I/O is `kubernetes::shard_leases`.

pub mod balance;

use std::time::Duration;

/// The prefix of the shard Leases' names: shard `K` is `fleetpulse-shard-K`.
pub const LEASE_PREFIX: &str = "fleetpulse-shard-";
/// The label every shard Lease carries (`true`), so a replica lists them in one request.
pub const LEASE_LABEL: &str = "fleetpulse.io/shard-lease";
/// The annotation on a shard Lease naming the URL its holder serves agents on, so a
/// replica that does not own a cluster's shard can tell the agent where to go.
pub const URL_ANNOTATION: &str = "fleetpulse.io/hub-url";
/// Annotation a holder puts on its Leases while its partition brake freezes set
/// reassignment (`frozen`), so the replica evaluating the sets freezes them too.
pub const BRAKE_ANNOTATION: &str = "fleetpulse.io/brake";
/// The default number of shards: enough for a few dozen replicas to share a fleet evenly,
/// few enough that the Lease renewals stay a handful of writes a second.
pub const DEFAULT_SHARDS: u32 = 32;

/// The name of shard `shard`'s Lease.
pub fn lease_name(shard: u32) -> String {
    format!("{LEASE_PREFIX}{shard}")
}

/// The shard a Lease name stands for, if it is a shard Lease's.
pub fn shard_of_lease(name: &str) -> Option<u32> {
    name.strip_prefix(LEASE_PREFIX)?.parse().ok()
}

/// How this replica takes part in sharing the fleet.
#[derive(Clone, Debug)]
pub struct ShardSettings {
    /// Namespace of the shard Leases (the hub's own namespace).
    pub namespace: String,
    /// This replica's identity (its Pod name), recorded as the holder of its Leases.
    pub identity: String,
    /// How many shards the fleet is cut into; every replica must use the same count.
    pub shards: u32,
    /// How long a shard Lease lasts without renewal (whole seconds, at least 3). The
    /// holder renews every fifth of it and stops acting on a shard whose renewal has not
    /// landed within two thirds of it, as the leader does with its Lease.
    pub duration: Duration,
    /// The URL agents reach this replica at, written on the Leases it holds.
    pub url: Option<String>,
}

impl ShardSettings {
    /// How long this replica acts on a shard after its last renewal landed: two thirds of
    /// the lease duration, a third before another replica may take it.
    pub fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }

    /// How often the Leases are read and renewed: a fifth of the duration, at least 1 s.
    pub fn renew_every(&self) -> Duration {
        (self.duration / 5).max(Duration::from_secs(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_round_trip_and_other_leases_are_not_shards() {
        assert_eq!(lease_name(7), "fleetpulse-shard-7");
        assert_eq!(shard_of_lease(&lease_name(31)), Some(31));
        assert_eq!(shard_of_lease("fleetpulse-hub"), None);
        assert_eq!(shard_of_lease("fleetpulse-shard-x"), None);
    }
}

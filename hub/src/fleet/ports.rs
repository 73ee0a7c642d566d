//! What the fleet asks of the parts above it, as traits they implement: the keys enrolled
//! with bootstrap tokens (the enrolment service) and the statuses of mirror objects (the
//! mirror writer), and which clusters this replica acts on (the shard Leases, when
//! replicas share the fleet). The fleet holds them as trait objects, so it needs none of
//! those modules.

use fleetpulse_common::api::MirrorStatus;
use fleetpulse_common::protocol::keys::StrongKey;
use fleetpulse_common::protocol::replay::Rejection;
use fleetpulse_common::protocol::report::ClusterId;

/// Keys the heartbeat path accepts beyond `spec.agent.publicKeys`.
pub trait EnrolledKeys: Send + Sync {
    /// `None` if `kid` is not enrolled; else the key to verify with, or why it is refused.
    fn lookup(&self, cluster: &ClusterId, kid: &str) -> Option<Result<StrongKey, Rejection>>;

    /// Whether an operator asked for `cluster`'s key to be rotated (`fleetpulse-hub key
    /// rotate`), so the heartbeat answer tells its agent.
    fn rotation_requested(&self, cluster: &ClusterId) -> bool;
}

/// The state of each mirror object, for the read API.
pub trait MirrorStatuses: Send + Sync {
    /// The statuses of `cluster`'s mirror objects.
    fn status(&self, cluster: &ClusterId) -> Vec<MirrorStatus>;
}

/// Which clusters this replica judges, when hub replicas share the fleet by shards.
pub trait Ownership: Send + Sync {
    /// `None` while this replica does not own `cluster`'s shard; else the term of its
    /// ownership, a number (from 1) that changes each time this replica takes the shard
    /// again, so the fleet knows to give the shard's clusters a fresh grace period.
    fn term(&self, cluster: &ClusterId) -> Option<u64>;

    /// Tells the other replicas whether this replica's partition brake freezes set
    /// reassignment (its clusters went quiet at once: it may be cut off from them).
    fn publish_brake(&self, _frozen: bool) {}

    /// Whether another replica's partition brake freezes set reassignment: the replica
    /// evaluating the sets freezes them too, so a replica cut off from its agents never
    /// fails their sets over through the verdicts it writes.
    fn brake_elsewhere(&self) -> bool {
        false
    }
}

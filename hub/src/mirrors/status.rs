//! What mirroring reports: the state of each mirror object (for the read API and `get`),
//! the `Mirrored` condition of a cluster folded from them, and the change
//! the hub records when that condition changes.

use fleetpulse_common::protocol::report::ClusterId;
use serde::Serialize;

pub use fleetpulse_common::api::{MirrorState, MirrorStatus};

/// The `Mirrored` condition of one cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MirroredCondition {
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// Stable reason: `Mirrored`, `NotConnected`, or the reason of the first failing mirror.
    pub reason: String,
    /// Which objects are written, or which failed and how to fix them.
    pub message: String,
}

/// A change of a cluster's `Mirrored` condition. The hub keeps it in the MemberCluster's
/// status; in Kubernetes mode the status change is published as an Event, as every
/// condition's is (a Warning unless it turned True).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorChange {
    /// The MemberCluster.
    pub cluster: ClusterId,
    /// Its new `Mirrored` condition.
    pub condition: MirroredCondition,
}

/// Folds the statuses of a cluster's mirrors into its condition; `None` while any is
/// still pending (and for a cluster without mirrors), so nothing is announced before the
/// outcome is known.
pub fn condition(statuses: &[MirrorStatus]) -> Option<MirroredCondition> {
    if statuses.is_empty() || statuses.iter().any(|s| s.state == MirrorState::Pending) {
        return None;
    }
    let failed: Vec<&MirrorStatus> = statuses
        .iter()
        .filter(|s| s.state == MirrorState::Failed)
        .collect();
    if let Some(first) = failed.first() {
        let message: Vec<&str> = failed.iter().map(|s| s.message.as_str()).collect();
        return Some(MirroredCondition {
            status: "False",
            reason: first.reason.clone(),
            message: message.join("; "),
        });
    }
    let objects: Vec<&str> = statuses.iter().map(|s| s.object.as_str()).collect();
    if statuses
        .iter()
        .any(|s| s.state == MirrorState::NotConnected)
    {
        return Some(MirroredCondition {
            status: "Unknown",
            reason: "NotConnected".into(),
            message: format!(
                "no mirror cluster configured (--mirror-kubeconfig); would write {}",
                objects.join(", ")
            ),
        });
    }
    Some(MirroredCondition {
        status: "True",
        reason: "Mirrored".into(),
        message: format!("up to date: {}", objects.join(", ")),
    })
}

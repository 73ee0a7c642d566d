//! What mirroring reports: the state of each mirror object (for the read API and `get`),
//! the `Mirrored` condition of a cluster folded from them, and the change (with its Event)
//! the hub publishes when that condition changes.

use std::collections::BTreeMap;

use fleetpulse_common::protocol::report::ClusterId;
use serde::Serialize;

/// Where one mirror object stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MirrorState {
    /// Not synced yet (or frozen by the partition brake before its first sync).
    Pending,
    /// Holds what fleetpulse wants.
    Written,
    /// The last attempt failed; see `reason` and `message`.
    Failed,
    /// No mirror cluster is configured (embedded hub without `--mirror-kubeconfig`): what
    /// would be written is shown, nothing is.
    NotConnected,
}

/// One mirror object of a cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MirrorStatus {
    /// `kind apiVersion namespace/name`.
    pub object: String,
    /// Where it stands.
    pub state: MirrorState,
    /// Stable reason (`Mirrored`, `MirrorNotFound`, `UnknownKind`, `KindNotServed`,
    /// `Forbidden`, `Conflict`, `WriteFailed`, `DefaultNotResolved`, `NotConnected`,
    /// `Pending`).
    pub reason: String,
    /// What happened and, on failure, the fix.
    pub message: String,
    /// The labels fleetpulse wants on it.
    pub labels: BTreeMap<String, String>,
    /// The effect of fleetpulse's taint wanted on it, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taint: Option<String>,
    /// Writes made to it since the hub started.
    pub writes: u64,
}

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

/// The condition type mirrors report on the MemberCluster.
pub const CONDITION_TYPE: &str = "Mirrored";

/// An Event to publish on the MemberCluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorEvent {
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// The condition's reason.
    pub reason: String,
    /// The condition's message.
    pub note: String,
}

/// A change of a cluster's `Mirrored` condition, with the Event that announces it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorChange {
    /// The MemberCluster.
    pub cluster: ClusterId,
    /// Its new `Mirrored` condition.
    pub condition: MirroredCondition,
    /// The Event to publish.
    pub event: MirrorEvent,
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

impl MirrorChange {
    /// The change to `condition` for `cluster`, with a Warning Event when it is not True.
    pub fn new(cluster: ClusterId, condition: MirroredCondition) -> Self {
        let event = MirrorEvent {
            type_: if condition.status == "True" {
                "Normal"
            } else {
                "Warning"
            },
            reason: condition.reason.clone(),
            note: condition.message.clone(),
        };
        Self {
            cluster,
            condition,
            event,
        }
    }
}

//! Condition types and reasons written by the hub, and helpers to set them the way
//! Kubernetes controllers do (the transition time moves only when the status changes).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// `Reachable`: heartbeats arrive within the grace period.
pub const REACHABLE: &str = "Reachable";
/// `Ready`: latched once the cluster was reachable and every readiness check passed.
pub const READY: &str = "Ready";
/// `Healthy`: debounced current state: reachable, ready, every liveness check passing.
pub const HEALTHY: &str = "Healthy";
/// `Mirrored`: every mirror object of the cluster holds what fleetpulse wants (only on
/// clusters with mirrors).
pub const MIRRORED: &str = "Mirrored";

/// `Accepted`: whether the hub took the object's latest version (on a HealthPolicy always;
/// on a MemberCluster only while a version of it is refused).
pub const ACCEPTED: &str = "Accepted";
/// `Enrolled`: an enrolled key is in force (on MemberClusters that enrol with a token).
pub const ENROLLED: &str = "Enrolled";
/// `Adopted`: the object a MemberCluster was adopted from exists (on adopted ones only).
pub const ADOPTED: &str = "Adopted";

/// A condition's status, as the strings Kubernetes uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"`.
    Unknown,
}

impl Status {
    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }

    /// Parses the Kubernetes spelling; anything else is `Unknown`.
    pub fn parse(s: &str) -> Self {
        match s {
            "True" => Status::True,
            "False" => Status::False,
            _ => Status::Unknown,
        }
    }
}

impl From<bool> for Status {
    fn from(b: bool) -> Self {
        if b { Status::True } else { Status::False }
    }
}

/// Finds a condition by type.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Sets a condition. The transition time changes only when the status changes; reason and
/// message are always updated. Returns true if anything changed.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: Status,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            let status_changed = c.status != status.as_str();
            if !status_changed && c.reason == reason && c.message == message {
                return false;
            }
            if status_changed {
                c.status = status.as_str().to_owned();
                c.last_transition_time = Time(now);
            }
            c.reason = reason.to_owned();
            c.message = message.to_owned();
            true
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_owned(),
                status: status.as_str().to_owned(),
                reason: reason.to_owned(),
                message: message.to_owned(),
                last_transition_time: Time(now),
                observed_generation: None,
            });
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let t1 = Timestamp::from_second(2_000).unwrap();
        let t2 = Timestamp::from_second(3_000).unwrap();
        let mut cs = Vec::new();
        assert!(set(&mut cs, READY, Status::True, "A", "m", t0));
        assert!(set(&mut cs, READY, Status::True, "B", "m2", t1));
        assert_eq!(cs[0].last_transition_time.0, t0);
        assert!(!set(&mut cs, READY, Status::True, "B", "m2", t2));
        assert!(set(&mut cs, READY, Status::False, "C", "m3", t2));
        assert_eq!(cs[0].last_transition_time.0, t2);
        assert_eq!(cs.len(), 1);
    }
}

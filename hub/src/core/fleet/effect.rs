//! [`Effect`]: what the decisions ask the shell to carry out, in the order decided.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use fleetpulse_common::protocol::replay::{Position, Rejection};

use super::super::brake::BrakeEvent;
use super::super::sets::SetChange;
use crate::ids::ClusterId;

/// What the shell must carry out.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// A heartbeat was refused; nothing changed.
    Refused {
        /// The cluster it named.
        cluster: ClusterId,
        /// Why, as the agent is told.
        rejection: Rejection,
    },
    /// A heartbeat was accepted at this position.
    Accepted {
        /// The cluster.
        cluster: ClusterId,
        /// The position accepted.
        position: Position,
        /// The config generation the hub serves the cluster.
        config_generation: u64,
    },
    /// A cluster's health conditions changed: persist and publish them.
    Conditions {
        /// The cluster.
        cluster: ClusterId,
        /// Its health conditions now (`Reachable`, `Ready`, `Healthy`).
        conditions: Vec<Condition>,
    },
    /// Whether two agents seem to share a cluster's key changed.
    SharedKey {
        /// The cluster.
        cluster: ClusterId,
        /// Whether its key now looks shared.
        shared: bool,
    },
    /// A set's status changed: persist it; a failover when it dropped clusters.
    Set(SetChange),
    /// The membership labels of a cluster changed: every set that now selects it.
    Membership {
        /// The cluster.
        cluster: ClusterId,
        /// The membership label keys it carries now.
        labels: Vec<String>,
    },
    /// The partition brake changed.
    Brake(BrakeEvent),
}

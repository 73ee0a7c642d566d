//! The Event consumer: every condition transition of a MemberCluster, ClusterSet or Set
//! and every change of a set's selection becomes an Event ([`crate::kubernetes::events`]),
//! by difference from what was last published (or read at start). Best effort: a refused
//! Event is logged by the publisher and never fails the write.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use fleetpulse_common::api::SetStatus;
use fleetpulse_common::protocol::report::ClusterId;

use crate::core::sets::selected_ids;
use crate::ids::SetKey;
use crate::kubernetes::events::{self, Publisher};
use crate::store::{Snapshot, Write};

/// Publishes Events; remembers each cluster's conditions and each set's status as last
/// published.
pub struct EventLog {
    publisher: Publisher,
    clusters: HashMap<ClusterId, Vec<Condition>>,
    sets: HashMap<SetKey, SetStatus>,
}

impl EventLog {
    /// Publishing through `publisher`, knowing nothing published yet.
    pub fn new(publisher: Publisher) -> Self {
        Self {
            publisher,
            clusters: HashMap::new(),
            sets: HashMap::new(),
        }
    }

    /// Remembers the statuses the API holds at start, so a restart publishes no Event for
    /// what was already so.
    pub fn seed(&mut self, snapshot: &Snapshot) {
        for (id, record) in &snapshot.clusters {
            self.clusters
                .insert(id.clone(), record.status.conditions.clone());
        }
        self.sets.clone_from(&snapshot.sets);
    }

    /// Publishes the Events of the change `write` carries.
    pub async fn apply(&mut self, write: &Write) {
        match write {
            Write::Cluster { cluster, record } => {
                let after = &record.status.conditions;
                let before = self.clusters.get(cluster).map(Vec::as_slice);
                if before == Some(after.as_slice()) {
                    return;
                }
                let events = events::condition_events(before.unwrap_or_default(), after);
                self.publisher.cluster(cluster, events).await;
                self.clusters.insert(cluster.clone(), after.clone());
            }
            Write::Set { key, status } => {
                let before = self.sets.get(key).cloned().unwrap_or_default();
                if &before == status {
                    return;
                }
                let (was, now) = (selected_ids(key, &before), selected_ids(key, status));
                let events = events::set_events(&before, status, &was, &now);
                self.publisher.set(key, events).await;
                self.sets.insert(key.clone(), status.clone());
            }
            Write::Positions { .. } => {}
        }
    }
}

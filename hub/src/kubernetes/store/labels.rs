//! The membership-label consumer: a set's membership label is added to the MemberClusters
//! its selection gains and removed from those it loses (a merge patch of
//! `metadata.labels`; `null` removes), by difference from the selection last labelled.

use std::collections::HashMap;

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use fleetpulse_common::api::{MEMBERSHIP_LABEL_VALUE, MemberCluster};
use fleetpulse_common::protocol::report::ClusterId;

use super::ignore_not_found;
use crate::core::sets::selected_ids;
use crate::ids::SetKey;
use crate::store::{Snapshot, StoreError, Write};

/// Labels the members of each set; remembers each set's selection as last labelled.
pub struct MembershipLabels {
    client: kube::Client,
    selections: HashMap<SetKey, Vec<ClusterId>>,
}

impl MembershipLabels {
    /// Labels through `client`, knowing no selection yet.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            selections: HashMap::new(),
        }
    }

    /// Remembers the selections the API holds at start.
    pub fn seed(&mut self, snapshot: &Snapshot) {
        for (key, status) in &snapshot.sets {
            self.selections
                .insert(key.clone(), selected_ids(key, status));
        }
    }

    /// Moves the membership label of the set `write` carries, if its selection changed.
    pub async fn apply(&mut self, write: &Write) -> Result<(), StoreError> {
        let Write::Set { key, status } = write else {
            return Ok(());
        };
        let now = selected_ids(key, status);
        let before = self
            .selections
            .get(key)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if before == now.as_slice() {
            return Ok(());
        }
        let label = key.label_key();
        let changes = (now.iter())
            .filter(|c| !before.contains(c))
            .map(|c| (c, json!(MEMBERSHIP_LABEL_VALUE)))
            .chain(
                (before.iter())
                    .filter(|c| !now.contains(c))
                    .map(|c| (c, serde_json::Value::Null)),
            );
        for (cluster, value) in changes {
            let api: Api<MemberCluster> = Api::namespaced(self.client.clone(), &cluster.namespace);
            let patch = Patch::Merge(json!({ "metadata": { "labels": { label.clone(): value } } }));
            let result = api
                .patch(&cluster.name, &PatchParams::default(), &patch)
                .await;
            ignore_not_found(result, || {
                format!("membership label of MemberCluster {cluster}")
            })?;
        }
        self.selections.insert(key.clone(), now);
        Ok(())
    }
}

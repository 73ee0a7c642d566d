//! The pure part of mirroring: from what the hub decided for a cluster, the labels and the
//! taint fleetpulse wants on one mirror object; and, from what the object holds, whether a
//! write is needed and what the taint list becomes. No I/O; time is an argument.

use std::collections::{BTreeMap, BTreeSet};

use fleetpulse_common::api::{
    HEALTHY_LABEL, MEMBERSHIP_LABEL_VALUE, MirrorRef, REACHABLE_LABEL, UNHEALTHY_TAINT,
};
use serde_json::{Value, json};

use super::kind::MirrorKind;

/// What the hub decided for one cluster, as mirrors need it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MirrorInput {
    /// Whether the cluster's agent is reporting (`Reachable=True`).
    pub reachable: bool,
    /// Whether the cluster is Healthy (`Healthy=True`).
    pub healthy: bool,
    /// The membership label keys the MemberCluster carries
    /// (`clusterset.fleetpulse.io/<set>`, `set.fleetpulse.io/<set>`), each with the value
    /// `selected`.
    pub memberships: BTreeSet<String>,
}

/// Whether fleetpulse's taint belongs on the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaintPlan {
    /// The kind's tool does not schedule by taints: `spec.taints` is never read or written.
    NotManaged,
    /// No fleetpulse taint (the cluster is Healthy).
    Absent,
    /// `health.fleetpulse.io/unhealthy` with this effect.
    Present(&'static str),
}

/// The labels and taint fleetpulse wants on one mirror object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// Every label fleetpulse owns on the object, with its value; others it owned before are
    /// to be removed.
    pub labels: BTreeMap<String, String>,
    /// The taint.
    pub taint: TaintPlan,
}

/// What fleetpulse wants on a mirror of `kind` for a cluster in state `input`.
pub fn plan(kind: MirrorKind, mirror: &MirrorRef, input: &MirrorInput) -> Wanted {
    let flag = |b: bool| if b { "true" } else { "false" }.to_owned();
    let mut labels = BTreeMap::from([
        (REACHABLE_LABEL.to_owned(), flag(input.reachable)),
        (HEALTHY_LABEL.to_owned(), flag(input.healthy)),
    ]);
    for key in &input.memberships {
        labels.insert(key.clone(), MEMBERSHIP_LABEL_VALUE.to_owned());
    }
    let taint = match kind.taint_effect(mirror.taint_effect) {
        None => TaintPlan::NotManaged,
        Some(_) if input.healthy => TaintPlan::Absent,
        Some(effect) => TaintPlan::Present(effect),
    };
    Wanted { labels, taint }
}

/// What a mirror object holds of what fleetpulse manages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// The label keys `manager` owns by server-side apply (from `metadata.managedFields`).
    pub owned_labels: BTreeSet<String>,
    /// `spec.taints` as stored.
    pub taints: Vec<Value>,
    /// `metadata.resourceVersion`, for optimistic concurrency.
    pub resource_version: String,
}

impl Observed {
    /// Reads an object as the API returned it; `manager` is fleetpulse's field manager.
    pub fn from_object(object: &Value, manager: &str) -> Self {
        let meta = &object["metadata"];
        let labels = meta["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect();
        Self {
            labels,
            owned_labels: owned_label_keys(&meta["managedFields"], manager),
            taints: object["spec"]["taints"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            resource_version: meta["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        }
    }
}

/// The label keys `manager` owns through `Apply` in a `managedFields` list (FieldsV1:
/// `{"f:metadata": {"f:labels": {"f:<key>": {}}}}`).
pub fn owned_label_keys(managed_fields: &Value, manager: &str) -> BTreeSet<String> {
    managed_fields
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["manager"] == manager && e["operation"] == "Apply")
        .filter_map(|e| e["fieldsV1"]["f:metadata"]["f:labels"].as_object())
        .flat_map(|labels| labels.keys())
        .filter_map(|k| k.strip_prefix("f:").map(str::to_owned))
        .collect()
}

/// Whether the labels need an apply: a wanted label is missing or different, or a label
/// fleetpulse owns is no longer wanted.
pub fn labels_need_apply(wanted: &Wanted, observed: &Observed) -> bool {
    let missing = wanted
        .labels
        .iter()
        .any(|(k, v)| observed.labels.get(k) != Some(v));
    let stale = observed
        .owned_labels
        .iter()
        .any(|k| !wanted.labels.contains_key(k) && observed.labels.contains_key(k));
    missing || stale
}

/// The taint list the object should have, or `None` when it already matches. Only the
/// entry keyed `health.fleetpulse.io/unhealthy` is added, changed or removed; every other
/// taint stays as it is, in its place. `now` is RFC 3339, for `timeAdded`.
pub fn taints_after(
    kind: MirrorKind,
    wanted: TaintPlan,
    current: &[Value],
    now: &str,
) -> Option<Vec<Value>> {
    let ours = |t: &Value| t["key"] == UNHEALTHY_TAINT;
    let existing: Vec<&Value> = current.iter().filter(|t| ours(t)).collect();
    let others = current.iter().filter(|t| !ours(t)).cloned();
    match wanted {
        TaintPlan::NotManaged => None,
        TaintPlan::Absent if existing.is_empty() => None,
        TaintPlan::Absent => Some(others.collect()),
        TaintPlan::Present(effect) if existing.len() == 1 && existing[0]["effect"] == effect => {
            None
        }
        TaintPlan::Present(effect) => {
            let mut taint = json!({"key": UNHEALTHY_TAINT, "effect": effect});
            if kind.taint_has_time_added() {
                taint["timeAdded"] = now.into();
            }
            Some(others.chain(std::iter::once(taint)).collect())
        }
    }
}

#[cfg(test)]
mod tests;

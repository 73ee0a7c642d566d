//! Kubernetes Events for what the hub decides, so `kubectl describe` and event-based
//! alerting see them: one Event per condition transition of a MemberCluster, ClusterSet or
//! Set, and one per change of a set's selection (`FailedOver` when a selected cluster was
//! replaced). They are derived from the status writes by difference, so they are exactly as
//! frequent as transitions.
//!
//! Publishing is best effort: a refused Event is logged and never fails the status write
//! it belongs to.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use fleetpulse_common::api::{ClusterSet, HealthPolicy, MemberCluster, Set, SetStatus};
use fleetpulse_common::protocol::report::ClusterId;

use crate::ids::SetKey;

/// The API version of the hub's kinds, as Events refer to them.
const API_VERSION: &str = "fleetpulse.io/v1alpha1";

/// Conditions whose `True` is the abnormal state.
const ABNORMAL_WHEN_TRUE: &[&str] = &["ReassignmentFrozen", "Degraded", "SharedKey"];

/// Whether a condition's status is the state to warn about: not `True`, or `True` for a
/// condition like `ReassignmentFrozen` whose `True` is the exception.
fn abnormal(type_: &str, status: &str) -> bool {
    ABNORMAL_WHEN_TRUE.contains(&type_) == (status == "True")
}

/// Events for each condition that changed status between `before` and `after`: `Warning`
/// when it turned abnormal (not `True`; `True` for `ReassignmentFrozen`), `Normal`
/// otherwise. A condition's first appearance as `Unknown` (nothing known yet) is not an
/// Event. The reason is the condition's reason; the action is the condition type.
pub fn condition_events(before: &[Condition], after: &[Condition]) -> Vec<Event> {
    after
        .iter()
        .filter_map(|c| {
            let previous = before.iter().find(|b| b.type_ == c.type_);
            if previous.is_some_and(|p| p.status == c.status)
                || (previous.is_none() && c.status == "Unknown")
            {
                return None;
            }
            let was = previous.map_or("absent", |p| p.status.as_str());
            let message = if c.message.is_empty() {
                String::new()
            } else {
                format!(": {}", c.message)
            };
            Some(Event {
                type_: if abnormal(&c.type_, &c.status) {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: c.reason.clone(),
                note: Some(truncate(format!(
                    "{} {was} -> {}{message}",
                    c.type_, c.status
                ))),
                action: c.type_.clone(),
                secondary: None,
            })
        })
        .collect()
}

/// The Event for a change of a set's selection, if it changed: `FailedOver` (a selected
/// cluster replaced by another), `Selected` (clusters added) or `Deselected` (removed).
pub fn selection_event(
    before: &[ClusterId],
    after: &[ClusterId],
    why: Option<&str>,
) -> Option<Event> {
    let added: Vec<String> = after
        .iter()
        .filter(|c| !before.contains(c))
        .map(ToString::to_string)
        .collect();
    let removed: Vec<String> = before
        .iter()
        .filter(|c| !after.contains(c))
        .map(ToString::to_string)
        .collect();
    let because = why.map(|w| format!(" ({w})")).unwrap_or_default();
    let (type_, reason, note) = match (added.is_empty(), removed.is_empty()) {
        (true, true) => return None,
        (false, false) => (
            EventType::Warning,
            "FailedOver",
            format!(
                "replaced {} with {}{because}",
                removed.join(", "),
                added.join(", ")
            ),
        ),
        (false, true) => (
            EventType::Normal,
            "Selected",
            format!("selected {}", added.join(", ")),
        ),
        (true, false) => (
            EventType::Warning,
            "Deselected",
            format!("deselected {}{because}", removed.join(", ")),
        ),
    };
    Some(Event {
        type_,
        reason: reason.to_owned(),
        note: Some(truncate(note)),
        action: "Select".to_owned(),
        secondary: None,
    })
}

/// Events of a set's status change: its condition transitions and its selection change.
pub fn set_events(
    before: &SetStatus,
    after: &SetStatus,
    selected_before: &[ClusterId],
    selected_after: &[ClusterId],
) -> Vec<Event> {
    let mut events = condition_events(&before.conditions, &after.conditions);
    events.extend(selection_event(
        selected_before,
        selected_after,
        after.last_failover_reason.as_deref(),
    ));
    events
}

/// An Event note may hold 1 kB.
fn truncate(mut note: String) -> String {
    const MAX: usize = 1024;
    if note.len() > MAX {
        let mut end = MAX - 3;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str("...");
    }
    note
}

/// Publishes Events about the hub's objects.
pub struct Publisher {
    client: kube::Client,
    reporter: Reporter,
    /// UIDs of the objects Events were published about, looked up once each.
    uids: HashMap<String, Option<String>>,
}

impl Publisher {
    /// A publisher reporting as `fleetpulse-hub` from `instance` (the replica's identity).
    pub fn new(client: kube::Client, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: "fleetpulse-hub".into(),
            instance,
        };
        Self {
            reporter,
            client,
            uids: HashMap::new(),
        }
    }

    /// Publishes `events` about a MemberCluster.
    pub async fn cluster(&mut self, cluster: &ClusterId, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let api: Api<MemberCluster> = Api::namespaced(self.client.clone(), &cluster.namespace);
        let uid = self
            .uid(&api, "MemberCluster", &cluster.namespace, &cluster.name)
            .await;
        let reference = ObjectReference {
            api_version: Some(API_VERSION.into()),
            kind: Some("MemberCluster".into()),
            namespace: Some(cluster.namespace.clone()),
            name: Some(cluster.name.clone()),
            uid,
            ..Default::default()
        };
        self.publish(&reference, events).await;
    }

    /// Publishes `events` about a HealthPolicy (as read from the API, with its UID).
    pub async fn policy(&mut self, policy: &HealthPolicy, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let reference = ObjectReference {
            api_version: Some(API_VERSION.into()),
            kind: Some("HealthPolicy".into()),
            namespace: policy.metadata.namespace.clone(),
            name: policy.metadata.name.clone(),
            uid: policy.metadata.uid.clone(),
            ..Default::default()
        };
        self.publish(&reference, events).await;
    }

    /// Publishes `events` about a ClusterSet or Set (ClusterSet Events land in `default`).
    pub async fn set(&mut self, key: &SetKey, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let reference = match key {
            SetKey::ClusterSet(name) => {
                let api: Api<ClusterSet> = Api::all(self.client.clone());
                ObjectReference {
                    api_version: Some(API_VERSION.into()),
                    kind: Some("ClusterSet".into()),
                    name: Some(name.clone()),
                    uid: self.uid(&api, "ClusterSet", "", name).await,
                    ..Default::default()
                }
            }
            SetKey::Set(id) => {
                let api: Api<Set> = Api::namespaced(self.client.clone(), &id.namespace);
                ObjectReference {
                    api_version: Some(API_VERSION.into()),
                    kind: Some("Set".into()),
                    namespace: Some(id.namespace.clone()),
                    name: Some(id.name.clone()),
                    uid: self.uid(&api, "Set", &id.namespace, &id.name).await,
                    ..Default::default()
                }
            }
        };
        self.publish(&reference, events).await;
    }

    async fn publish(&self, reference: &ObjectReference, events: Vec<Event>) {
        for event in events {
            // A fresh recorder per Event: the recorder folds Events of the same object,
            // reason and action within 6 minutes into one series that keeps the first
            // note, which would misreport a second failover or a recovery. Transitions
            // are debounced already, so one Event each is the right count.
            let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
            if let Err(e) = recorder.publish(&event, reference).await {
                tracing::warn!(
                    kind = reference.kind.as_deref(),
                    name = reference.name.as_deref(),
                    reason = event.reason,
                    error = %e,
                    "could not publish an Event; check the hub may create events.k8s.io Events"
                );
            }
        }
    }

    async fn uid<K>(
        &mut self,
        api: &Api<K>,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<String>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let key = format!("{kind}/{namespace}/{name}");
        if let Some(uid) = self.uids.get(&key) {
            return uid.clone();
        }
        let uid = match api.get_opt(name).await {
            Ok(object) => object.and_then(|o| o.meta().uid.clone()),
            Err(e) => {
                tracing::debug!(%key, error = %e, "no UID for an Event");
                return None;
            }
        };
        self.uids.insert(key, uid.clone());
        uid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: "why".into(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
            observed_generation: None,
        }
    }

    #[test]
    fn only_changed_conditions_become_events_with_their_severity() {
        let before = vec![
            condition("Reachable", "True", "HeartbeatsArriving"),
            condition("Healthy", "True", "ChecksPassing"),
        ];
        let after = vec![
            condition("Reachable", "False", "HeartbeatsStopped"),
            condition("Healthy", "True", "ChecksPassing"),
            condition("Ready", "True", "ReadinessChecksPassed"),
        ];
        let events = condition_events(&before, &after);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].reason, "HeartbeatsStopped");
        assert_eq!(events[0].type_, EventType::Warning);
        assert_eq!(
            events[0].note.as_deref(),
            Some("Reachable True -> False: why")
        );
        assert_eq!(events[1].type_, EventType::Normal);
        assert_eq!(events[1].note.as_deref(), Some("Ready absent -> True: why"));
        assert!(condition_events(&after, &after).is_empty());
    }

    #[test]
    fn the_brake_warns_when_it_engages_and_first_unknowns_are_quiet() {
        let engaged = condition_events(
            &[condition("ReassignmentFrozen", "False", "Normal")],
            &[condition(
                "ReassignmentFrozen",
                "True",
                "PartitionSuspected",
            )],
        );
        assert_eq!(engaged[0].type_, EventType::Warning);
        let released = condition_events(
            &[condition(
                "ReassignmentFrozen",
                "True",
                "PartitionSuspected",
            )],
            &[condition("ReassignmentFrozen", "False", "Normal")],
        );
        assert_eq!(released[0].type_, EventType::Normal);
        let first = condition_events(
            &[],
            &[condition("Reachable", "Unknown", "AwaitingFirstHeartbeat")],
        );
        assert_eq!(first.len(), 0, "no Event for a first Unknown");
    }

    #[test]
    fn a_replaced_cluster_is_a_failover() {
        let a = [ClusterId::new("fleet", "a")];
        let b = [ClusterId::new("fleet", "b")];
        let event = selection_event(&a, &b, Some("fleet/a is unreachable")).unwrap();
        assert_eq!(event.reason, "FailedOver");
        assert_eq!(event.type_, EventType::Warning);
        assert_eq!(
            event.note.as_deref(),
            Some("replaced fleet/a with fleet/b (fleet/a is unreachable)")
        );
        assert_eq!(selection_event(&[], &a, None).unwrap().reason, "Selected");
        assert_eq!(selection_event(&a, &[], None).unwrap().reason, "Deselected");
        assert!(selection_event(&a, &a, None).is_none());
    }

    #[test]
    fn long_notes_are_cut_at_a_character_boundary() {
        let note = truncate("é".repeat(1000));
        assert!(note.len() <= 1024);
        assert!(note.ends_with("..."));
    }
}

//! HealthPolicy status in Kubernetes mode: after every reload, each HealthPolicy whose
//! status on the API differs from what the hub computed (the clusters it matches, and the
//! `Accepted` condition that reports check-name clashes) gets its status written through
//! the status subresource. An unchanged policy costs no write, and a condition keeps its
//! transition time on the API while its status stays the same, across hub restarts too.

use fleetpulse_common::api::condition::{self, Status};
use fleetpulse_common::api::{HealthPolicy, HealthPolicyStatus};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::events::{Publisher, condition_events};

/// The status to write for `computed` given the policy's status `on_api`, or `None` when
/// the API already says it: the computed conditions applied onto the API's, so transition
/// times move only when a status changes.
pub fn next_status(
    on_api: Option<&HealthPolicyStatus>,
    computed: &HealthPolicyStatus,
    now: Timestamp,
) -> Option<HealthPolicyStatus> {
    let mut next = on_api.cloned().unwrap_or_default();
    next.matched_clusters = computed.matched_clusters;
    next.observed_generation = computed.observed_generation;
    for c in &computed.conditions {
        condition::set(
            &mut next.conditions,
            &c.type_,
            Status::parse(&c.status),
            &c.reason,
            &c.message,
            now,
        );
    }
    next.conditions
        .retain(|c| condition::find(&computed.conditions, &c.type_).is_some());
    (on_api != Some(&next)).then_some(next)
}

/// Writes the status of every policy in `computed` (the registry's) that differs from the
/// one in `on_api` (the watched objects), and publishes an Event for each condition that
/// changed status (a `Degraded` rollout brake is a Warning). A failure is logged; the next
/// reload retries.
pub async fn write(
    client: &kube::Client,
    publisher: &mut Publisher,
    on_api: &[HealthPolicy],
    computed: &[HealthPolicy],
    now: Timestamp,
) -> usize {
    let mut written = 0;
    for policy in computed {
        let (Some(namespace), Some(name), Some(status)) = (
            policy.metadata.namespace.as_deref(),
            policy.metadata.name.as_deref(),
            policy.status.as_ref(),
        ) else {
            continue;
        };
        let current = on_api.iter().find(|p| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() == Some(name)
        });
        let Some(next) = next_status(current.and_then(|p| p.status.as_ref()), status, now) else {
            continue;
        };
        let api: Api<HealthPolicy> = Api::namespaced(client.clone(), namespace);
        let patch = Patch::Merge(json!({ "status": next }));
        match api
            .patch_status(name, &PatchParams::default(), &patch)
            .await
        {
            Ok(_) => {
                written += 1;
                if let Some(current) = current {
                    let before = current.status.as_ref().map(|s| s.conditions.as_slice());
                    let events = condition_events(before.unwrap_or_default(), &next.conditions);
                    publisher.policy(current, events).await;
                }
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => tracing::warn!(
                policy = %format!("{namespace}/{name}"),
                error = %e,
                "could not write the HealthPolicy status; retried on the next change"
            ),
        }
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(matched: u32, accepted: Status, reason: &str, at: i64) -> HealthPolicyStatus {
        let mut s = HealthPolicyStatus {
            matched_clusters: matched,
            observed_generation: Some(1),
            ..Default::default()
        };
        let t = Timestamp::from_second(1_800_000_000 + at).unwrap();
        condition::set(&mut s.conditions, "Accepted", accepted, reason, "m", t);
        s
    }

    #[test]
    fn an_unchanged_status_is_not_written_and_keeps_its_transition_time() {
        let now = Timestamp::from_second(1_900_000_000).unwrap();
        let on_api = status(2, Status::True, "Applied", 0);
        // The registry stamps its own time; the API's is kept while the status holds.
        assert_eq!(
            next_status(Some(&on_api), &status(2, Status::True, "Applied", 50), now),
            None
        );
        let grown = next_status(Some(&on_api), &status(3, Status::True, "Applied", 50), now)
            .expect("matched clusters changed");
        assert_eq!(grown.matched_clusters, 3);
        assert_eq!(
            grown.conditions[0].last_transition_time,
            on_api.conditions[0].last_transition_time
        );
        let clash = status(3, Status::False, "CheckNameClash", 50);
        let next = next_status(Some(&on_api), &clash, now).expect("a clash is written");
        assert_eq!(next.conditions[0].reason, "CheckNameClash");
        assert_eq!(next.conditions[0].last_transition_time.0, now);
        assert!(
            next_status(None, &clash, now).is_some(),
            "a first status is written"
        );
    }
}

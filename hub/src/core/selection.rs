//! Set selection: which clusters a ClusterSet or Set selects, as a pure function of the
//! set's spec, its previous selection, the clusters' states and `now`.
//!
//! - *Matching*: in scope (a `Set` sees only its namespace), and named in `clusterRefs` or
//!   matched by a non-empty `clusterSelector` (an empty selector matches nothing, as in
//!   Sveltos). Duplicates count once.
//! - *Eligible*: matching, `Ready` and `Healthy`.
//! - *Order*: the integer value of `failover.priorityLabel` (higher first; missing or not an
//!   integer counts as 0; beyond 64 bits saturates), then namespace, then name.
//! - Previously selected clusters that still match stay (sticky) while eligible, or while
//!   ineligible for less than `failover.tolerationSeconds`; the rest are dropped. If more
//!   stay than `maxReplicas` (the set shrank), eligible ones are kept first, in order.
//!   Free places are filled from eligible clusters in order. With `failback`, the selection
//!   is instead the first `maxReplicas` of the eligible and still-tolerated clusters in
//!   order, so a recovered higher-priority cluster displaces its replacement.
//! - *Never empty on health*: when health alone would leave a set that selected clusters
//!   with none (every selected cluster past its toleration and no eligible replacement),
//!   the previously selected clusters that still match stay selected ([`Outcome::held`]);
//!   downstream tools must not undeploy everywhere because the hub lost sight of the
//!   clusters. Only operator changes (clusters no longer matching) shrink it further.
//! - *Frozen* (the partition brake): nothing is dropped or added for health; only what the
//!   operator changed applies (clusters no longer matching, a smaller `maxReplicas`).

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::ids::{ClusterId, Scope};
use fleetpulse_common::api::SetSpec;
use fleetpulse_common::selector;

/// What selection needs to know about one cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterView {
    /// `namespace/name`.
    pub id: ClusterId,
    /// The MemberCluster's labels.
    pub labels: BTreeMap<String, String>,
    /// Ready and Healthy.
    pub eligible: bool,
    /// When it last became ineligible (the later transition of Ready/Healthy that is not
    /// True); `None` when eligible.
    pub ineligible_since: Option<Timestamp>,
    /// Why it is ineligible, e.g. `Healthy=False (Unreachable)`.
    pub reason: String,
}

/// The result of one evaluation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Matching clusters, in order.
    pub matching: Vec<ClusterId>,
    /// Selected clusters, in order; at most `maxReplicas`.
    pub selected: Vec<ClusterId>,
    /// How many selected clusters are eligible.
    pub eligible_selected: usize,
    /// How many matching clusters are eligible.
    pub eligible_matching: usize,
    /// Previously selected clusters dropped because their toleration ran out, with why.
    pub dropped: Vec<(ClusterId, String)>,
    /// Clusters newly selected.
    pub added: Vec<ClusterId>,
    /// Previously selected clusters kept although their toleration ran out, because
    /// dropping them would have emptied the set (no eligible replacement).
    pub held: Vec<ClusterId>,
}

/// The priority label's integer value; values beyond 64 bits saturate, anything that is not
/// an integer counts as 0.
fn priority(view: &ClusterView, label: Option<&str>) -> i64 {
    use std::num::IntErrorKind;
    let Some(value) = label.and_then(|l| view.labels.get(l)) else {
        return 0;
    };
    match value.trim().parse::<i64>() {
        Ok(p) => p,
        Err(e) if *e.kind() == IntErrorKind::PosOverflow => i64::MAX,
        Err(e) if *e.kind() == IntErrorKind::NegOverflow => i64::MIN,
        Err(_) => 0,
    }
}

/// Evaluates a set. `previous` is the last selection; `clusters` may come in any order.
pub fn select(
    spec: &SetSpec,
    scope: Scope<'_>,
    previous: &[ClusterId],
    clusters: &[ClusterView],
    now: Timestamp,
    frozen: bool,
) -> Outcome {
    let max = spec.max_replicas.max(1) as usize;
    let default_ns = match scope {
        Scope::Fleet => "default",
        Scope::Namespace(ns) => ns,
    };
    let refs: HashSet<ClusterId> = spec
        .cluster_refs
        .iter()
        .map(|r| ClusterId::new(r.namespace.as_deref().unwrap_or(default_ns), &r.name))
        .collect();
    let selected_by_labels = |c: &ClusterView| {
        spec.cluster_selector
            .as_ref()
            .is_some_and(|s| !selector::is_empty(s) && selector::matches(s, &c.labels))
    };
    let label = spec.failover.priority_label.as_deref();
    let mut matching: Vec<&ClusterView> = clusters
        .iter()
        .filter(|c| match scope {
            Scope::Fleet => true,
            Scope::Namespace(ns) => c.id.namespace == ns,
        })
        .filter(|c| refs.contains(&c.id) || selected_by_labels(c))
        .collect();
    matching.sort_by(|a, b| {
        (Reverse(priority(a, label)), &a.id).cmp(&(Reverse(priority(b, label)), &b.id))
    });
    matching.dedup_by(|a, b| a.id == b.id);
    let position = |id: &ClusterId| matching.iter().position(|c| &c.id == id);

    let toleration = Duration::from_secs(spec.failover.toleration_seconds.into());
    let tolerated = |c: &ClusterView| {
        c.eligible
            || c.ineligible_since
                .is_some_and(|since| now.duration_since(since).unsigned_abs() < toleration)
    };
    let mut previous_matching: Vec<&ClusterView> = matching
        .iter()
        .copied()
        .filter(|c| previous.contains(&c.id))
        .collect();

    let mut dropped = Vec::new();
    let mut held = Vec::new();
    let mut selected: Vec<&ClusterView> = if frozen {
        previous_matching.truncate(max);
        previous_matching
    } else {
        let fallback: Vec<&ClusterView> = previous_matching.iter().copied().take(max).collect();
        let (keep, expired): (Vec<&ClusterView>, Vec<&ClusterView>) =
            previous_matching.into_iter().partition(|c| tolerated(c));
        dropped = expired
            .iter()
            .map(|c| (c.id.clone(), c.reason.clone()))
            .collect();
        let chosen: Vec<&ClusterView> = if spec.failover.failback {
            matching
                .iter()
                .copied()
                .filter(|c| c.eligible || keep.iter().any(|k| k.id == c.id))
                .take(max)
                .collect()
        } else {
            let mut keep = keep;
            keep.sort_by_key(|c| (!c.eligible, position(&c.id)));
            keep.truncate(max);
            for c in matching.iter().copied().filter(|c| c.eligible) {
                if keep.len() >= max {
                    break;
                }
                if !keep.iter().any(|k| k.id == c.id) {
                    keep.push(c);
                }
            }
            keep
        };
        if chosen.is_empty() && !fallback.is_empty() {
            // Health alone never empties a set: keep the last selection, drop nobody.
            dropped.clear();
            held = fallback.iter().map(|c| c.id.clone()).collect();
            fallback
        } else {
            chosen
        }
    };
    selected.sort_by_key(|c| position(&c.id));
    Outcome {
        eligible_selected: selected.iter().filter(|c| c.eligible).count(),
        eligible_matching: matching.iter().filter(|c| c.eligible).count(),
        added: selected
            .iter()
            .filter(|c| !previous.contains(&c.id))
            .map(|c| c.id.clone())
            .collect(),
        dropped,
        held,
        selected: selected.iter().map(|c| c.id.clone()).collect(),
        matching: matching.iter().map(|c| c.id.clone()).collect(),
    }
}

#[cfg(test)]
mod tests;

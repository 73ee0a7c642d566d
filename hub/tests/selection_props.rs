//! Property tests of set selection over random fleets, specs and event sequences (time
//! passing, clusters failing and recovering, labels changing): `select` selects only
//! matching clusters, never more than `maxReplicas`, never one whose toleration ran out; it
//! is sticky without failback and follows priority with it, fills every free place it can,
//! does not care in which order it is told things, and changes nothing for health while
//! frozen.
//!
//! Each scenario is replayed step by step: a step advances a virtual clock, may toggle one
//! cluster's eligibility and flip its `env` label, then evaluates the set with the previous
//! step's selection. The oracles below restate the module docs of `selection.rs`
//! independently of its code.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use proptest::sample::subsequence;
use proptest::test_runner::TestCaseError;

use fleetpulse_common::api::{ClusterRef, FailoverPolicy, SetSpec};
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::core::selection::{ClusterView, Outcome, select};
use fleetpulse_hub::ids::Scope;

/// Wall-clock origin of every scenario.
const T0: i64 = 1_700_000_000;
/// Namespaces clusters live in. `default` is where a ClusterSet's namespace-less ref points;
/// `default-eu` sorts after it as a namespace but before it as a `namespace/` prefix.
const NAMESPACES: [&str; 2] = ["default", "default-eu"];
/// Cluster names whose byte order differs from their "natural" order.
const NAMES: [&str; 14] = [
    "a", "a-1", "a-10", "a-2", "a1", "aa", "b", "b.2", "B", "z", "0", "10", "9", "a-b",
];
/// The priority label, and its values with the order the docs give them: the integer, or 0
/// when the value is not an integer.
const PRIORITY_LABEL: &str = "fleetpulse.io/priority";
const PRIORITIES: [(&str, i64); 8] = [
    ("10", 10),
    ("2", 2),
    ("007", 7),
    ("0", 0),
    ("1", 1),
    ("x", 0),
    ("1.5", 0),
    ("high", 0),
];
const DOWN: &str = "Healthy=False (Unreachable)";

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(T0 + seconds).unwrap()
}

/// One event: time passes, then possibly one cluster changes.
#[derive(Clone, Debug)]
struct Step {
    advance: i64,
    /// Index into the fleet, modulo its size.
    cluster: usize,
    toggle_eligibility: bool,
    flip_env: bool,
    /// A permutation of 0..12, used to present the clusters in another order.
    permutation: Vec<usize>,
    /// Picks a `maxReplicas` of at most the previous selection's size, to evaluate a shrink.
    shrink: usize,
}

#[derive(Clone, Debug)]
struct Scenario {
    spec: SetSpec,
    /// `None` for a ClusterSet, the Set's namespace otherwise.
    set_namespace: Option<&'static str>,
    fleet: Vec<ClusterView>,
    /// The selection before the first step (at most `maxReplicas`, not necessarily matching).
    previous: Vec<ClusterId>,
    steps: Vec<Step>,
}

impl Scenario {
    fn scope(&self) -> Scope<'static> {
        self.set_namespace.map_or(Scope::Fleet, Scope::Namespace)
    }

    fn max(&self) -> usize {
        self.spec.max_replicas as usize
    }
}

/// What one step saw and what `select` answered.
struct Evaluation<'a> {
    scenario: &'a Scenario,
    previous: &'a [ClusterId],
    clusters: &'a [ClusterView],
    now: Timestamp,
    outcome: &'a Outcome,
    step: &'a Step,
    /// The cluster the step made eligible again, if it did.
    recovered: Option<&'a ClusterId>,
}

impl Evaluation<'_> {
    fn select(&self, frozen: bool) -> Outcome {
        select(
            &self.scenario.spec,
            self.scenario.scope(),
            self.previous,
            self.clusters,
            self.now,
            frozen,
        )
    }

    fn view(&self, id: &ClusterId) -> &ClusterView {
        self.clusters.iter().find(|c| &c.id == id).unwrap()
    }

    /// Eligible, or ineligible for less than `tolerationSeconds`.
    fn tolerated(&self, id: &ClusterId) -> bool {
        let c = self.view(id);
        let toleration = i64::from(self.scenario.spec.failover.toleration_seconds);
        c.eligible
            || c.ineligible_since
                .is_some_and(|since| self.now.as_second() - since.as_second() < toleration)
    }

    /// A `maxReplicas` in 1..=max(1, previous selection's size), to evaluate a shrink.
    fn shrunk_max(&self) -> usize {
        1 + self.step.shrink % self.previous.len().max(1)
    }

    fn was_selected(&self, id: &ClusterId) -> bool {
        self.previous.contains(id)
    }

    /// Kept past its toleration because dropping it would have emptied the set.
    fn held(&self, id: &ClusterId) -> bool {
        self.outcome.held.contains(id)
    }

    /// Health alone would have emptied the set: it selected clusters that still match, none
    /// of them is tolerated any longer, and no matching cluster is eligible.
    fn would_empty(&self) -> bool {
        let previous_matching = self
            .outcome
            .matching
            .iter()
            .filter(|id| self.was_selected(id));
        let mut previous_matching = previous_matching.peekable();
        previous_matching.peek().is_some()
            && previous_matching.all(|id| !self.tolerated(id))
            && self
                .outcome
                .matching
                .iter()
                .all(|id| !self.view(id).eligible)
    }
}

/// Replays the scenario with `frozen = false`, feeding each selection to the next step,
/// and runs `check` on every evaluation.
fn replay(
    scenario: &Scenario,
    mut check: impl FnMut(&Evaluation<'_>) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let mut fleet = scenario.fleet.clone();
    let mut previous = scenario.previous.clone();
    let mut clock = 0;
    for step in &scenario.steps {
        clock += step.advance;
        let now = at(clock);
        let index = step.cluster % fleet.len();
        let cluster = &mut fleet[index];
        let mut recovered = None;
        if step.toggle_eligibility {
            if cluster.eligible {
                cluster.eligible = false;
                cluster.ineligible_since = Some(now);
                cluster.reason = DOWN.into();
            } else {
                cluster.eligible = true;
                cluster.ineligible_since = None;
                cluster.reason = String::new();
                recovered = Some(cluster.id.clone());
            }
        }
        if step.flip_env {
            let flipped = if cluster.labels.get("env").is_some_and(|v| v == "prod") {
                "dev"
            } else {
                "prod"
            };
            cluster.labels.insert("env".into(), flipped.into());
        }
        let outcome = select(
            &scenario.spec,
            scenario.scope(),
            &previous,
            &fleet,
            now,
            false,
        );
        check(&Evaluation {
            scenario,
            previous: &previous,
            clusters: &fleet,
            now,
            outcome: &outcome,
            step,
            recovered: recovered.as_ref(),
        })?;
        previous = outcome.selected;
    }
    Ok(())
}

/// The docs' priority of a cluster: the label's integer value, 0 when missing or not one.
fn priority(spec: &SetSpec, c: &ClusterView) -> i64 {
    let Some(label) = spec.failover.priority_label.as_deref() else {
        return 0;
    };
    let Some(value) = c.labels.get(label) else {
        return 0;
    };
    PRIORITIES
        .iter()
        .find(|(v, _)| v == value)
        .map_or(0, |(_, p)| *p)
}

/// The docs' matching clusters, in the docs' order: in scope, and named in `clusterRefs`
/// (a ref without namespace means the Set's namespace, or `default` for a ClusterSet) or
/// matched by a selector that is not empty; higher priority first, then namespace, name.
fn expected_matching(s: &Scenario, clusters: &[ClusterView]) -> Vec<ClusterId> {
    let named = |c: &ClusterView| {
        s.spec.cluster_refs.iter().any(|r| {
            let ns = r
                .namespace
                .as_deref()
                .or(s.set_namespace)
                .unwrap_or("default");
            c.id == ClusterId::new(ns, &r.name)
        })
    };
    // Every non-empty selector the strategy builds means `env=prod`.
    let selected = |c: &ClusterView| {
        s.spec.cluster_selector.as_ref().is_some_and(|sel| {
            let non_empty = sel.match_labels.as_ref().is_some_and(|m| !m.is_empty())
                || sel
                    .match_expressions
                    .as_ref()
                    .is_some_and(|e| !e.is_empty());
            non_empty && c.labels.get("env").is_some_and(|v| v == "prod")
        })
    };
    let mut matching: Vec<&ClusterView> = clusters
        .iter()
        .filter(|c| s.set_namespace.is_none_or(|ns| c.id.namespace == ns))
        .filter(|c| named(c) || selected(c))
        .collect();
    matching.sort_by_key(|c| {
        (
            std::cmp::Reverse(priority(&s.spec, c)),
            c.id.namespace.clone(),
            c.id.name.clone(),
        )
    });
    matching.into_iter().map(|c| c.id.clone()).collect()
}

fn has_duplicates(ids: &[ClusterId]) -> bool {
    ids.iter().enumerate().any(|(i, id)| ids[..i].contains(id))
}

/// `ids` in the order they have in `order`.
fn in_order_of(ids: &[ClusterId], order: &[ClusterId]) -> Vec<ClusterId> {
    order
        .iter()
        .filter(|id| ids.contains(id))
        .cloned()
        .collect()
}

fn cluster_view() -> impl Strategy<Value = (Option<&'static str>, Option<&'static str>, bool, i64)>
{
    (
        prop_oneof![2 => Just(Some("prod")), 1 => Just(Some("dev")), 1 => Just(None)],
        prop::option::of(prop::sample::select(
            PRIORITIES.iter().map(|(v, _)| *v).collect::<Vec<_>>(),
        )),
        prop::bool::weighted(0.7),
        0..=300i64,
    )
}

/// 1..=12 clusters with distinct ids in 1..=2 namespaces, each with an optional `env`
/// label, an optional priority, and an eligibility (an ineligible one has been so for up to
/// five minutes).
fn fleet() -> impl Strategy<Value = Vec<ClusterView>> {
    (1..=NAMESPACES.len())
        .prop_flat_map(|namespaces| {
            let ids: Vec<ClusterId> = NAMESPACES[..namespaces]
                .iter()
                .flat_map(|ns| NAMES.iter().map(move |name| ClusterId::new(*ns, *name)))
                .collect();
            subsequence(ids, 1..=12)
        })
        .prop_flat_map(|ids| {
            let n = ids.len();
            (Just(ids), prop::collection::vec(cluster_view(), n))
        })
        .prop_map(|(ids, views)| {
            ids.into_iter()
                .zip(views)
                .map(|(id, (env, priority, eligible, down_for))| {
                    let mut labels = BTreeMap::from([("region".to_owned(), "eu".to_owned())]);
                    if let Some(env) = env {
                        labels.insert("env".into(), env.into());
                    }
                    if let Some(p) = priority {
                        labels.insert(PRIORITY_LABEL.into(), p.into());
                    }
                    ClusterView {
                        id,
                        labels,
                        eligible,
                        ineligible_since: (!eligible).then(|| at(-down_for)),
                        reason: if eligible { String::new() } else { DOWN.into() },
                    }
                })
                .collect()
        })
}

/// No selector, an empty one (matches nothing), or `env=prod` by labels or by expression;
/// mostly the latter, so that sets often match more clusters than they select.
fn selector() -> impl Strategy<Value = Option<LabelSelector>> {
    let prod = BTreeMap::from([("env".to_owned(), "prod".to_owned())]);
    let prod_expression = LabelSelectorRequirement {
        key: "env".into(),
        operator: "In".into(),
        values: Some(vec!["prod".into()]),
    };
    prop_oneof![
        1 => Just(None),
        1 => Just(Some(LabelSelector::default())),
        1 => Just(Some(LabelSelector { match_labels: Some(BTreeMap::new()), ..Default::default() })),
        3 => Just(Some(LabelSelector { match_labels: Some(prod), ..Default::default() })),
        2 => Just(Some(LabelSelector {
            match_expressions: Some(vec![prod_expression]),
            ..Default::default()
        })),
    ]
}

/// Refs to any name in any namespace (present or not, duplicates allowed), with the
/// namespace spelled out or left to the default.
fn cluster_refs() -> impl Strategy<Value = Vec<ClusterRef>> {
    prop::collection::vec((0..NAMES.len(), 0..NAMESPACES.len(), any::<bool>()), 0..=6).prop_map(
        |refs| {
            refs.into_iter()
                .map(|(name, ns, explicit)| ClusterRef {
                    namespace: explicit.then(|| NAMESPACES[ns].to_owned()),
                    name: NAMES[name].to_owned(),
                    ..Default::default()
                })
                .collect()
        },
    )
}

fn spec(
    failback: impl Strategy<Value = bool>,
    toleration: impl Strategy<Value = u32>,
) -> impl Strategy<Value = SetSpec> {
    (
        1..=5u32,
        toleration,
        failback,
        any::<bool>(),
        cluster_refs(),
        selector(),
    )
        .prop_map(
            |(max_replicas, toleration_seconds, failback, prioritised, cluster_refs, selector)| {
                SetSpec {
                    cluster_selector: selector,
                    cluster_refs,
                    max_replicas,
                    failover: FailoverPolicy {
                        toleration_seconds,
                        failback,
                        priority_label: prioritised.then(|| PRIORITY_LABEL.to_owned()),
                    },
                }
            },
        )
}

fn step() -> impl Strategy<Value = Step> {
    (
        0..=60i64,
        0..12usize,
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.25),
        Just((0..12).collect::<Vec<usize>>()).prop_shuffle(),
        0..5usize,
    )
        .prop_map(
            |(advance, cluster, toggle_eligibility, flip_env, permutation, shrink)| Step {
                advance,
                cluster,
                toggle_eligibility,
                flip_env,
                permutation,
                shrink,
            },
        )
}

/// A scenario whose spec has the given failback and toleration, and stays fixed throughout.
fn scenario(
    failback: impl Strategy<Value = bool>,
    toleration: impl Strategy<Value = u32>,
) -> impl Strategy<Value = Scenario> {
    (
        spec(failback, toleration),
        prop::option::of(prop::sample::select(NAMESPACES.to_vec())),
        fleet(),
        prop::collection::vec(0..12usize, 0..=5),
        prop::collection::vec(step(), 1..=20),
    )
        .prop_map(|(spec, set_namespace, fleet, previous, steps)| {
            let mut ids: Vec<ClusterId> = Vec::new();
            for i in previous {
                let id = &fleet[i % fleet.len()].id;
                if !ids.contains(id) {
                    ids.push(id.clone());
                }
            }
            ids.truncate(spec.max_replicas as usize);
            Scenario {
                spec,
                set_namespace,
                fleet,
                previous: ids,
                steps,
            }
        })
}

fn any_scenario() -> impl Strategy<Value = Scenario> {
    scenario(any::<bool>(), 0..=120u32)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn matching_is_the_in_scope_clusters_named_or_selected_by_priority_then_namespace_and_name(
        s in any_scenario(),
    ) {
        replay(&s, |e| {
            prop_assert_eq!(&e.outcome.matching, &expected_matching(&s, e.clusters));
            Ok(())
        })?;
    }

    #[test]
    fn never_more_than_max_replicas_are_selected_all_matching_distinct_and_in_order(
        s in any_scenario(),
    ) {
        replay(&s, |e| {
            let selected = &e.outcome.selected;
            prop_assert!(selected.len() <= s.max(), "{} selected of at most {}", selected.len(), s.max());
            prop_assert!(!has_duplicates(selected), "duplicates in {selected:?}");
            prop_assert_eq!(selected, &in_order_of(selected, &e.outcome.matching), "selected is a subsequence of matching");
            Ok(())
        })?;
    }

    #[test]
    fn no_cluster_stays_selected_once_its_toleration_has_run_out(s in any_scenario()) {
        replay(&s, |e| {
            for id in e.outcome.selected.iter().filter(|id| !e.held(id)) {
                let c = e.view(id);
                prop_assert!(
                    e.tolerated(id),
                    "{id} selected at t+{}s though ineligible since {:?} with toleration {}s",
                    e.now.as_second() - T0, c.ineligible_since.map(|t| t.as_second() - T0),
                    s.spec.failover.toleration_seconds,
                );
            }
            Ok(())
        })?;
    }

    #[test]
    fn health_alone_never_empties_a_set_it_keeps_the_last_selection_instead(
        s in any_scenario(),
    ) {
        replay(&s, |e| {
            let o = e.outcome;
            let still_matching: Vec<ClusterId> = o.matching.iter()
                .filter(|id| e.was_selected(id))
                .cloned()
                .collect();
            if !still_matching.is_empty() {
                prop_assert!(!o.selected.is_empty(), "emptied from {:?}", e.previous);
            }
            if e.would_empty() {
                let kept: Vec<ClusterId> = still_matching.into_iter().take(s.max()).collect();
                prop_assert_eq!(&o.held, &kept);
                prop_assert_eq!(&o.selected, &kept);
                prop_assert!(o.dropped.is_empty() && o.added.is_empty());
            } else {
                prop_assert!(o.held.is_empty(), "held {:?} though health keeps some", o.held);
            }
            Ok(())
        })?;
    }

    #[test]
    fn with_zero_toleration_only_eligible_clusters_are_selected(
        s in scenario(any::<bool>(), Just(0u32)),
    ) {
        replay(&s, |e| {
            for id in &e.outcome.selected {
                prop_assert!(e.view(id).eligible || e.held(id), "{id} is ineligible");
            }
            if e.outcome.held.is_empty() {
                prop_assert_eq!(e.outcome.eligible_selected, e.outcome.selected.len());
            }
            Ok(())
        })?;
    }

    #[test]
    fn without_failback_a_selected_cluster_that_still_matches_and_is_eligible_is_never_dropped(
        s in scenario(Just(false), 0..=120u32),
    ) {
        replay(&s, |e| {
            for id in e.previous {
                if e.outcome.matching.contains(id) && e.view(id).eligible {
                    prop_assert!(e.outcome.selected.contains(id), "{id} was dropped");
                }
            }
            Ok(())
        })?;
    }

    /// Covers a cluster recovering while the selection is full: it does not get in.
    #[test]
    fn without_failback_a_full_selection_that_still_matches_and_is_tolerated_is_unchanged(
        s in scenario(Just(false), 0..=120u32),
    ) {
        replay(&s, |e| {
            let full = e.previous.len() == s.max();
            let all_stay = e.previous.iter().all(|id| e.outcome.matching.contains(id) && e.tolerated(id));
            if full && all_stay {
                prop_assert_eq!(
                    &e.outcome.selected, &in_order_of(e.previous, &e.outcome.matching),
                    "recovered: {:?}", e.recovered,
                );
                prop_assert!(e.outcome.added.is_empty() && e.outcome.dropped.is_empty());
            }
            Ok(())
        })?;
    }

    /// The spec stays fixed in a scenario, so a shrink is evaluated beside each step.
    #[test]
    fn without_failback_a_shrunk_set_keeps_its_eligible_clusters_first_in_order(
        s in scenario(Just(false), 0..=120u32),
    ) {
        replay(&s, |e| {
            if e.previous.is_empty() {
                return Ok(());
            }
            let mut shrunk = s.spec.clone();
            shrunk.max_replicas = e.shrunk_max() as u32;
            let out = select(&shrunk, s.scope(), e.previous, e.clusters, e.now, false);
            let max = shrunk.max_replicas as usize;
            prop_assert!(out.selected.len() <= max, "{} selected of at most {max}", out.selected.len());
            let still_eligible: Vec<ClusterId> = out.matching.iter()
                .filter(|id| e.was_selected(id) && e.view(id).eligible)
                .cloned()
                .collect();
            for id in still_eligible.iter().take(max) {
                prop_assert!(out.selected.contains(id), "{id} dropped for max {max}: {:?}", out.selected);
            }
            for id in &out.selected {
                prop_assert!(e.view(id).eligible || (e.was_selected(id) && e.tolerated(id)) || e.held(id), "{id}");
            }
            Ok(())
        })?;
    }

    #[test]
    fn the_outcome_does_not_depend_on_the_order_of_clusters_or_of_the_previous_selection(
        s in any_scenario(),
    ) {
        replay(&s, |e| {
            let shuffled: Vec<ClusterView> = e.step.permutation.iter()
                .filter(|&&i| i < e.clusters.len())
                .map(|&i| e.clusters[i].clone())
                .collect();
            let previous: Vec<ClusterId> = e.previous.iter().rev().cloned().collect();
            for frozen in [false, true] {
                let reordered = select(&s.spec, s.scope(), &previous, &shuffled, e.now, frozen);
                prop_assert_eq!(&reordered, &e.select(frozen), "frozen: {}", frozen);
            }
            Ok(())
        })?;
    }

    #[test]
    fn when_there_is_room_every_eligible_matching_cluster_is_selected(s in any_scenario()) {
        replay(&s, |e| {
            if e.outcome.selected.len() < s.max() {
                for id in &e.outcome.matching {
                    if e.view(id).eligible {
                        prop_assert!(e.outcome.selected.contains(id), "{id} left out with room");
                    }
                }
            }
            Ok(())
        })?;
    }

    #[test]
    fn frozen_keeps_the_previous_clusters_that_still_match_up_to_max_and_adds_none(
        s in any_scenario(),
    ) {
        replay(&s, |e| {
            for max in [s.max(), e.shrunk_max()] {
                let mut spec = s.spec.clone();
                spec.max_replicas = max as u32;
                let frozen = select(&spec, s.scope(), e.previous, e.clusters, e.now, true);
                let mut expected = in_order_of(e.previous, &frozen.matching);
                expected.truncate(max);
                prop_assert_eq!(&frozen.selected, &expected, "max {}", max);
                prop_assert!(frozen.added.is_empty(), "added while frozen: {:?}", frozen.added);
                prop_assert!(frozen.dropped.is_empty(), "dropped for health while frozen: {:?}", frozen.dropped);
                prop_assert_eq!(&frozen.matching, &e.outcome.matching);
            }
            Ok(())
        })?;
    }

    #[test]
    fn with_failback_the_selection_is_the_first_max_eligible_or_tolerated_previous_in_order(
        s in scenario(Just(true), 0..=120u32),
    ) {
        replay(&s, |e| {
            let expected: Vec<ClusterId> = e.outcome.matching.iter()
                .filter(|id| e.view(id).eligible || (e.was_selected(id) && e.tolerated(id)))
                .take(s.max())
                .cloned()
                .collect();
            if !e.would_empty() {
                prop_assert_eq!(&e.outcome.selected, &expected);
            }
            Ok(())
        })?;
    }

    #[test]
    fn added_dropped_and_counts_describe_the_change_from_the_previous_selection(
        s in any_scenario(),
    ) {
        replay(&s, |e| {
            let o = e.outcome;
            let added: Vec<ClusterId> = o.selected.iter().filter(|id| !e.was_selected(id)).cloned().collect();
            prop_assert_eq!(&o.added, &added);
            let expired: Vec<ClusterId> = o.matching.iter()
                .filter(|id| e.was_selected(id) && !e.tolerated(id))
                .cloned()
                .collect();
            let dropped: Vec<ClusterId> = o.dropped.iter().map(|(id, _)| id.clone()).collect();
            let expired = if e.would_empty() { vec![] } else { expired };
            prop_assert_eq!(&dropped, &expired);
            for (id, reason) in &o.dropped {
                prop_assert_eq!(reason, &e.view(id).reason);
            }
            let eligible = |ids: &[ClusterId]| ids.iter().filter(|id| e.view(id).eligible).count();
            prop_assert_eq!(o.eligible_selected, eligible(&o.selected));
            prop_assert_eq!(o.eligible_matching, eligible(&o.matching));
            Ok(())
        })?;
    }
}

fn prod(namespace: &str, name: &str) -> ClusterView {
    ClusterView {
        id: ClusterId::new(namespace, name),
        labels: BTreeMap::from([("env".into(), "prod".into())]),
        eligible: true,
        ineligible_since: None,
        reason: String::new(),
    }
}

#[test]
fn a_set_never_selects_clusters_of_another_namespace_even_when_named_in_its_refs() {
    let clusters = [
        prod("default", "a"),
        prod("default-eu", "a"),
        prod("default-eu", "b"),
    ];
    let foreign = [
        ClusterId::new("default-eu", "a"),
        ClusterId::new("default-eu", "b"),
    ];
    let spec = SetSpec {
        cluster_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("env".into(), "prod".into())])),
            ..Default::default()
        }),
        cluster_refs: foreign
            .iter()
            .map(|id| ClusterRef {
                namespace: Some(id.namespace.clone()),
                name: id.name.clone(),
                ..Default::default()
            })
            .collect(),
        max_replicas: 5,
        failover: FailoverPolicy {
            failback: true,
            ..Default::default()
        },
    };
    let own = [ClusterId::new("default", "a")];
    for previous in [&[][..], &foreign[..]] {
        for frozen in [false, true] {
            let out = select(
                &spec,
                Scope::Namespace("default"),
                previous,
                &clusters,
                at(0),
                frozen,
            );
            assert_eq!(out.matching, own, "previous {previous:?}, frozen {frozen}");
            let expected: &[ClusterId] = if frozen { &[] } else { &own };
            assert_eq!(
                out.selected, expected,
                "previous {previous:?}, frozen {frozen}"
            );
        }
    }
}

/// The docs order by "the integer value" of the priority label; a label value may hold 63
/// digits, more than an `i64` does.
#[test]
fn a_priority_too_large_for_64_bits_still_ranks_above_smaller_integers() {
    let mut small = prod("default", "a");
    small.labels.insert(PRIORITY_LABEL.into(), "1".into());
    let mut large = prod("default", "b");
    large
        .labels
        .insert(PRIORITY_LABEL.into(), "99999999999999999999".into());
    let spec = SetSpec {
        cluster_refs: vec![
            ClusterRef {
                name: "a".into(),
                ..Default::default()
            },
            ClusterRef {
                name: "b".into(),
                ..Default::default()
            },
        ],
        max_replicas: 1,
        failover: FailoverPolicy {
            priority_label: Some(PRIORITY_LABEL.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let out = select(&spec, Scope::Fleet, &[], &[small, large], at(0), false);
    assert_eq!(out.selected, [ClusterId::new("default", "b")]);
}

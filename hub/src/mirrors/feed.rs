//! The mirror writer's one input from the fleet. After every evaluation of the sets (a
//! health transition, an object change, a brake change) it works out what each cluster's
//! mirrors should hold and tells the writer only what differs from what it told it last;
//! it freezes the writer while the partition brake holds; it keeps a cluster's last input
//! while a tripped rollout holds that cluster (a broken check must not taint the fleet any
//! more than it may empty a set); and it records each `Mirrored` change in the cluster's
//! status.
//!
//! A hub projects only the silence it observed itself: a cluster this hub process has not
//! heard from since it started (it restarted while cut off from its fleet, say) keeps the
//! health its mirrors already show, however long it stays silent; its set memberships
//! still follow the sets, which never empty on health alone. Without this, a hub
//! restarted behind a partition would mark every mirror unhealthy once the startup grace
//! ran out, since the partition brake only counts clusters it heard.
//!
//! Likewise a cluster reporting again keeps the health its mirrors show until `Healthy`
//! has a verdict of its own (the debounce's passing reports), instead of showing the
//! `Healthy=False` its silence left for a heartbeat or two.
//!
//! A cluster is first mirrored once the hub has a verdict on it: it was Healthy, it is
//! Unreachable, or a liveness check fails it. Until then (never heard from, or reporting
//! but not yet Ready) its mirrors are left as they are: installing the hub in front of a
//! running fleet, or a cluster joining, must not mark mirrors unhealthy and taint them
//! for the seconds before the first checks pass (a `NoExecute` taint evicts).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use fleetpulse_common::api::MirrorRef;
use fleetpulse_common::api::condition::{self, HEALTHY, REACHABLE, Status};
use fleetpulse_common::protocol::report::ClusterId;
use k8s_openapi::jiff::Timestamp;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use super::{MirrorArgs, MirrorChange, MirrorInput, MirrorsHandle};
use crate::core::health::reason::{LIVENESS_CHECKS_FAILING, UNREACHABLE};
use crate::fleet::Fleet;

/// Feeds `handle` from `fleet` until `stop`; `changes` is the writer's receiver of
/// `Mirrored` changes.
pub async fn run(
    fleet: Arc<Fleet>,
    args: MirrorArgs,
    handle: MirrorsHandle,
    mut changes: UnboundedReceiver<MirrorChange>,
    stop: CancellationToken,
) {
    let decided = fleet.decisions();
    let mut feed = Feed::default();
    feed.sync(&fleet, &args, &handle);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = decided.notified() => feed.sync(&fleet, &args, &handle),
            Some(change) = changes.recv() => {
                fleet.set_mirrored(&change.cluster, Some(&change.condition), Timestamp::now());
            }
        }
    }
}

/// What the writer was last told about one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Told {
    mirrors: Vec<MirrorRef>,
    problems: Vec<String>,
    input: MirrorInput,
}

#[derive(Default)]
struct Feed {
    frozen: bool,
    told: HashMap<ClusterId, Told>,
}

impl Feed {
    fn sync(&mut self, fleet: &Fleet, args: &MirrorArgs, handle: &MirrorsHandle) {
        // The brake first: the writer must be frozen before it hears of the clusters that
        // went quiet.
        let frozen = fleet.reassignment_frozen();
        if frozen != self.frozen {
            handle.freeze(frozen);
            self.frozen = frozen;
        }
        let registry = fleet.registry();
        let held = fleet.rollout_held();
        let mut memberships: Option<HashMap<ClusterId, Vec<String>>> = None;
        let mut present = HashSet::new();
        for entry in registry.clusters() {
            let known = self.told.contains_key(&entry.id);
            if entry.object.spec.mirrors.is_empty() && args.mirror_defaults.is_empty() && !known {
                continue;
            }
            present.insert(entry.id.clone());
            let (mirrors, problems) = args.mirrors_of(&entry.object);
            if mirrors.is_empty() && problems.is_empty() {
                // Its mirrors were removed from the spec: no longer managed, no condition.
                self.told.remove(&entry.id);
                handle.forget(entry.id.clone());
                fleet.set_mirrored(&entry.id, None, Timestamp::now());
                continue;
            }
            let (reachable, healthy, verdict, unheard, returning) = {
                let state = entry.state.lock();
                let conditions = state.health.conditions();
                let healthy = condition::find(conditions, HEALTHY);
                let failing = healthy.is_some_and(|c| c.reason == LIVENESS_CHECKS_FAILING);
                let unreachable = healthy.is_some_and(|c| c.reason == UNREACHABLE);
                let (reachable, healthy) =
                    (state.health.status(REACHABLE), state.health.status(HEALTHY));
                let unheard = state.liveness.last_heartbeat().is_none();
                let verdict =
                    healthy == Status::True || (reachable == Status::False && !unheard) || failing;
                // Reporting again, `Healthy` still says why it went: not a verdict yet.
                let returning = reachable == Status::True && unreachable;
                (reachable, healthy, verdict, unheard, returning)
            };
            let told = self.told.get(&entry.id).map(|t| &t.input);
            let input = match told {
                Some(told) if held.contains(&entry.id) => told.clone(),
                None if !verdict => continue,
                _ => {
                    let memberships = memberships.get_or_insert_with(|| fleet.membership_labels());
                    let memberships = (memberships.get(&entry.id).into_iter().flatten())
                        .cloned()
                        .collect::<BTreeSet<String>>();
                    // Silence this hub did not observe keeps the health shown.
                    let unobserved = reachable != Status::True && unheard;
                    let kept = |now: bool, then: fn(&MirrorInput) -> bool| match told {
                        Some(t) => then(t),
                        None => now,
                    };
                    let reachable_now = reachable == Status::True;
                    let healthy_now = healthy == Status::True;
                    MirrorInput {
                        reachable: if unobserved {
                            kept(reachable_now, |t| t.reachable)
                        } else {
                            reachable_now
                        },
                        healthy: if unobserved || returning {
                            kept(healthy_now, |t| t.healthy)
                        } else {
                            healthy_now
                        },
                        memberships,
                    }
                }
            };
            let told = Told {
                mirrors,
                problems,
                input,
            };
            if self.told.get(&entry.id) != Some(&told) {
                handle.observe(entry.id.clone(), &told.mirrors, &told.problems, &told.input);
                self.told.insert(entry.id.clone(), told);
            }
        }
        self.told.retain(|id, _| {
            let keep = present.contains(id);
            if !keep {
                handle.forget(id.clone());
            }
            keep
        });
    }
}

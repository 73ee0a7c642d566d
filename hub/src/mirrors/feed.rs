//! The mirror writer's one input from the fleet. After every evaluation of the sets (a
//! health transition, an object change, a brake change) it works out what each cluster's
//! mirrors should hold and tells the writer only what differs from what it told it last;
//! it freezes the writer while the partition brake holds; it keeps a cluster's last input
//! while a tripped rollout holds that cluster (a broken check must not taint the fleet any
//! more than it may empty a set); and it records each `Mirrored` change in the cluster's
//! status.
//!
//! A sync reads only the clusters that changed since the last one (the fleet's index of
//! them, [`crate::fleet::Changed`]), so its cost follows the changes, not the fleet's size:
//! the first sync, and one after set statuses were restored or adopted, read every cluster.
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

use super::{MirrorArgs, MirrorChange, MirrorInput, MirroredCondition, MirrorsHandle};
use crate::core::health::reason::{LIVENESS_CHECKS_FAILING, UNREACHABLE};
use crate::fleet::{ClusterEntry, ClusterState, Fleet};

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
    let mut pace = Pace::default();
    let sync = |feed: &mut Feed, pace: &mut Pace| {
        let (read, took) = pace.timed(|| feed.sync(&fleet, &args, &handle));
        fleet.metrics().mirror_feed.record(read, took);
    };
    sync(&mut feed, &mut pace);
    let mut pending = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = decided.notified(), if !pending => pending = true,
            () = tokio::time::sleep_until(pace.next), if pending => {
                sync(&mut feed, &mut pace);
                pending = false;
            }
            Some(change) = changes.recv() => {
                set_mirrored(&fleet, &change.cluster, Some(&change.condition), Timestamp::now());
            }
        }
    }
}

/// When the feed may sync next. A fleet coming up decides something on nearly every
/// report; a sync reads only the clusters that changed since the last one, but syncing on
/// each decision would still wake the feed once per report. After a sync that took `t` the
/// feed waits `IDLE_SHARE * t` (at most [`Pace::MAX_WAIT`]) before the next, and the
/// decisions made meanwhile are taken together by it: at most a tenth of a core whatever
/// the fleet's size (the first sync, and one after set statuses were restored or adopted,
/// read every cluster), and no wait at all that a small fleet would notice.
#[derive(Debug)]
struct Pace {
    next: tokio::time::Instant,
}

impl Default for Pace {
    fn default() -> Self {
        Self {
            next: tokio::time::Instant::now(),
        }
    }
}

impl Pace {
    /// Time idle per unit of time syncing.
    const IDLE_SHARE: u32 = 9;
    /// The longest wait between two syncs, however long the last one took.
    const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

    /// Runs `sync` and sets when the next may run; returns what it returned and how long
    /// it took.
    fn timed<T>(&mut self, sync: impl FnOnce() -> T) -> (T, std::time::Duration) {
        let start = tokio::time::Instant::now();
        let out = sync();
        let took = start.elapsed();
        self.next = start + took + Self::wait_after(took);
        (out, took)
    }

    /// The wait after a sync that took `took`.
    fn wait_after(took: std::time::Duration) -> std::time::Duration {
        (took * Self::IDLE_SHARE).min(Self::MAX_WAIT)
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
    /// Each cluster's membership labels, as the sets last gave them.
    memberships: HashMap<ClusterId, Vec<String>>,
}

impl Feed {
    /// Tells the writer what changed since the last sync ([`Fleet::take_changed`]);
    /// returns how many clusters it read.
    fn sync(&mut self, fleet: &Fleet, args: &MirrorArgs, handle: &MirrorsHandle) -> usize {
        // The brake first: the writer must be frozen before it hears of the clusters that
        // went quiet.
        let frozen = fleet.reassignment_frozen();
        if frozen != self.frozen {
            handle.freeze(frozen);
            self.frozen = frozen;
        }
        let changed = fleet.take_changed();
        if changed.is_empty() {
            return 0;
        }
        let registry = fleet.registry();
        let held = fleet.rollout_held();
        if changed.all {
            self.memberships = fleet.membership_labels();
            let mut read = 0;
            for entry in registry.clusters() {
                self.sync_one(entry, fleet, args, handle, &held);
                read += 1;
            }
            self.told.retain(|id, _| {
                let keep = registry.cluster(id).is_some();
                if !keep {
                    handle.forget(id.clone());
                }
                keep
            });
            return read;
        }
        for (id, labels) in changed.memberships {
            if labels.is_empty() {
                self.memberships.remove(&id);
            } else {
                self.memberships.insert(id, labels);
            }
        }
        for id in &changed.clusters {
            match registry.cluster(id) {
                Some(entry) => self.sync_one(entry, fleet, args, handle, &held),
                // Gone from the registry.
                None => {
                    if self.told.remove(id).is_some() {
                        handle.forget(id.clone());
                    }
                }
            }
        }
        changed.clusters.len()
    }

    /// Tells the writer what `entry`'s mirrors should hold now, if that differs from what
    /// it was told.
    fn sync_one(
        &mut self,
        entry: &ClusterEntry,
        fleet: &Fleet,
        args: &MirrorArgs,
        handle: &MirrorsHandle,
        held: &HashSet<ClusterId>,
    ) {
        let known = self.told.contains_key(&entry.id);
        if entry.object.spec.mirrors.is_empty() && args.mirror_defaults.is_empty() && !known {
            return;
        }
        let (mirrors, problems) = args.mirrors_of(&entry.object);
        if mirrors.is_empty() && problems.is_empty() {
            // Its mirrors were removed from the spec: no longer managed, no condition.
            if known {
                self.told.remove(&entry.id);
                handle.forget(entry.id.clone());
                set_mirrored(fleet, &entry.id, None, Timestamp::now());
            }
            return;
        }
        let told = self.told.get(&entry.id).map(|t| &t.input);
        let input = match told {
            Some(told) if held.contains(&entry.id) => told.clone(),
            _ => {
                let seen = Seen::of(&entry.state.lock());
                if told.is_none() && !seen.verdict() {
                    return;
                }
                let memberships = (self.memberships.get(&entry.id).into_iter().flatten())
                    .cloned()
                    .collect();
                seen.input(told, memberships)
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
}

/// What a cluster's health says to its mirrors now.
struct Seen {
    reachable: Status,
    healthy: Status,
    /// `Healthy=False` because a liveness check fails: a verdict of the hub's own.
    failing: bool,
    /// Reporting again while `Healthy` still says `Unreachable`: not a verdict yet.
    returning: bool,
    /// Not heard from since this hub started.
    unheard: bool,
}

impl Seen {
    fn of(state: &ClusterState) -> Self {
        let reason =
            condition::find(state.core.health.conditions(), HEALTHY).map(|c| c.reason.as_str());
        let reachable = state.core.health.status(REACHABLE);
        Self {
            reachable,
            healthy: state.core.health.status(HEALTHY),
            failing: reason == Some(LIVENESS_CHECKS_FAILING),
            returning: reachable == Status::True && reason == Some(UNREACHABLE),
            unheard: state.core.liveness.last_heartbeat().is_none(),
        }
    }

    /// Whether the hub has a verdict of its own: what a first mirroring waits for.
    fn verdict(&self) -> bool {
        self.healthy == Status::True
            || (self.reachable == Status::False && !self.unheard)
            || self.failing
    }

    /// What the mirrors should hold, given what they were `told` before: silence this hub
    /// did not observe, and a return not yet judged, keep the health shown.
    fn input(&self, told: Option<&MirrorInput>, memberships: BTreeSet<String>) -> MirrorInput {
        let unobserved = self.reachable != Status::True && self.unheard;
        let (reachable, healthy) = (self.reachable == Status::True, self.healthy == Status::True);
        MirrorInput {
            reachable: match told {
                Some(t) if unobserved => t.reachable,
                _ => reachable,
            },
            healthy: match told {
                Some(t) if unobserved || self.returning => t.healthy,
                _ => healthy,
            },
            memberships,
        }
    }
}

/// Records a cluster's `Mirrored` condition (`None`: it has no mirrors any more) in the
/// fleet, which writes its status if that changed it.
pub fn set_mirrored(
    fleet: &Fleet,
    cluster: &ClusterId,
    mirrored: Option<&MirroredCondition>,
    wall: Timestamp,
) {
    let condition = mirrored.map(|m| {
        (
            Status::parse(m.status),
            m.reason.as_str(),
            m.message.as_str(),
        )
    });
    fleet.set_condition(cluster, condition::MIRRORED, condition, wall);
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod reads;

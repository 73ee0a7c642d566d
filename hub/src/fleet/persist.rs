//! The fleet and its store: what a start restores (each cluster's record and positions,
//! the sets' statuses, and the restart floor when positions may have been lost), the
//! batched flushes of positions and statuses, and the status write of a transition or of a
//! condition kept outside the health core (`Mirrored`, `Accepted`, ...).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;

use fleetpulse_common::api::condition::Status;
use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::ClusterId;

use super::{ClusterState, Fleet};
use crate::store::{PositionsKept, Snapshot, Write};

impl Fleet {
    /// Seeds runtime state from the store at start. Every restored cluster gets a full
    /// grace period from `now` before the detector judges it (startup grace). When the
    /// store may lack positions accepted before this start, no incarnation from before
    /// `wall` is accepted from now on.
    pub fn restore(&self, snapshot: Snapshot, now: Instant, wall: Timestamp) {
        let Snapshot {
            mut clusters,
            mut positions,
            mut heard,
            sets,
            positions_kept,
        } = snapshot;
        self.floor_incarnations(positions_kept, wall);
        self.sets.lock().decisions.sets.statuses.extend(sets);
        self.changed.lock().mark_all();
        let ids: HashSet<ClusterId> = (clusters.keys().chain(positions.keys()))
            .chain(heard.keys())
            .cloned()
            .collect();
        let mut states = self.states.lock();
        for id in ids {
            let mut state = ClusterState::restore(
                now,
                wall,
                clusters.remove(&id),
                positions.remove(&id).unwrap_or_default(),
            );
            if let Some(heard) = heard.remove(&id) {
                state.carry_over(heard, now, wall);
            }
            states.insert(id, Arc::new(Mutex::new(state)));
        }
    }

    /// Takes over what another hub replica last flushed of clusters whose shard this one
    /// has just taken: each key's accepted position where it is ahead of what this
    /// replica knew (a replay of a report the other replica accepted is then refused), and
    /// the time each was last heard from. The merged positions are flushed by this replica
    /// from now on.
    pub fn take_over(
        &self,
        positions: std::collections::HashMap<
            ClusterId,
            std::collections::HashMap<String, Position>,
        >,
        heard: std::collections::HashMap<ClusterId, Timestamp>,
        now: Instant,
        wall: Timestamp,
    ) {
        let states = self.states.lock();
        for (id, theirs) in positions {
            let Some(state) = states.get(&id) else {
                continue;
            };
            let mut state = state.lock();
            for (kid, position) in theirs {
                let ours = state.core.positions.entry(kid).or_insert(position);
                if position > *ours {
                    *ours = position;
                }
            }
            state.positions_dirty = true;
        }
        for (id, heard) in heard {
            if let Some(state) = states.get(&id) {
                state.lock().carry_over(heard, now, wall);
            }
        }
    }

    /// Replicas sharing the fleet: the conditions of the clusters `taken` selects (a shard
    /// just taken) become what their last owner wrote on their MemberClusters, not what this
    /// replica last knew of them, so the sets see no change when the shard moves.
    pub fn take_over_health(&self, taken: impl Fn(&ClusterId) -> bool, wall: Timestamp) {
        for entry in self.registry().clusters().filter(|e| taken(&e.id)) {
            let Some(status) = entry.object.status.as_ref() else {
                continue;
            };
            let uid = status.agent.as_ref().map(|a| a.cluster_uid.clone());
            use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, READY};
            let conditions = (status.conditions.iter())
                .filter(|c| [REACHABLE, READY, HEALTHY].contains(&c.type_.as_str()))
                .cloned()
                .collect();
            let health = crate::core::health::Health::restore(conditions, uid, wall);
            entry.state.lock().core.health = health;
        }
    }

    /// The restart rule after a start whose store may lack accepted positions: every report
    /// captured before `wall` is refused, whichever position was lost.
    fn floor_incarnations(&self, kept: PositionsKept, wall: Timestamp) {
        let floor = wall.as_millisecond().max(0) as u64;
        let why = match kept {
            PositionsKept::All => return,
            PositionsKept::UntilLastFlush => {
                "the embedded store has no mark of a clean stop (the hub crashed or was \
                 killed, or the -wal file beside the database was lost), so the positions \
                 accepted after its last flush are lost"
            }
            PositionsKept::NotStored => {
                "no hub state is on the API server yet (the first start of a hub that keeps it)"
            }
            PositionsKept::Stale => {
                "the hub state on the API server is older than a flush interval plus the lease \
                 duration, or part of it is missing, so positions accepted after it may be lost"
            }
        };
        if self.incarnation_floor.set(floor).is_ok() {
            let message = "agent incarnations from before this start are refused \
                           (stale_sequence); each agent running since before it restarts its \
                           sequence above the start once";
            match kept {
                PositionsKept::UntilLastFlush | PositionsKept::Stale => {
                    tracing::warn!(floor, why, "{message}")
                }
                _ => tracing::info!(floor, why, "{message}"),
            }
        }
    }

    /// The incarnation no accepted report may be at or below, if this start set one.
    pub(super) fn incarnation_floor(&self) -> Option<u64> {
        self.incarnation_floor.get().copied()
    }

    /// Writes the positions accepted since the last flush, in one batch. The heartbeat path
    /// only sets a per-cluster flag, so it shares no lock with other clusters.
    pub fn flush_positions(&self) {
        let writes: Vec<Write> = self
            .states
            .lock()
            .iter()
            .filter_map(|(id, state)| {
                let mut state = state.lock();
                std::mem::take(&mut state.positions_dirty).then(|| Write::Positions {
                    cluster: id.clone(),
                    positions: state.core.positions.clone(),
                    heard: state.last_heartbeat,
                })
            })
            .collect();
        self.store.send(writes);
    }

    /// Queues the live status of every cluster in `part` of `parts` (by a hash of its
    /// name) that has reported, so the stored `lastHeartbeatTime` and check results are at
    /// most one refresh interval old (the Kubernetes mode's coarse refresh). Called for
    /// each part in turn, it spreads the writes evenly over the interval instead of
    /// bursting every cluster at once. The store skips a record equal to the one it last
    /// wrote, so a cluster that stopped reporting costs nothing. Each record is queued
    /// under its cluster's lock, as [`Fleet::write_status`] explains.
    pub fn refresh_statuses(&self, part: u64, parts: u64) {
        use std::hash::{Hash, Hasher};
        let in_part = |id: &ClusterId| {
            let mut h = std::hash::DefaultHasher::new();
            id.hash(&mut h);
            h.finish() % parts.max(1) == part
        };
        for e in self.registry().clusters().filter(|e| in_part(&e.id)) {
            let state = e.state.lock();
            let record = state.record();
            if record.status.last_heartbeat_time.is_some() {
                let cluster = e.id.clone();
                self.store.send(vec![Write::Cluster { cluster, record }]);
            }
        }
    }

    /// Flushes positions and waits until the store has written everything queued.
    pub fn sync(&self) {
        self.flush_positions();
        self.store.sync();
    }

    /// Sets (or, with `None`, removes) one of the conditions kept outside the health core
    /// ([`super::cluster::EXTRA`]) and writes the cluster's status if that changed it.
    pub fn set_condition(
        &self,
        cluster: &ClusterId,
        type_: &str,
        value: Option<(Status, &str, &str)>,
        wall: Timestamp,
    ) {
        let Some(entry) = self.registry().cluster(cluster).cloned() else {
            return;
        };
        let mut state = entry.state.lock();
        if state.set_extra(type_, value, wall) {
            self.write_status(cluster, &mut state);
        }
    }

    /// Queues `cluster`'s status after a transition, counting it and keeping it in the
    /// transition log `describe` shows.
    ///
    /// `state` is the cluster's, borrowed from its lock guard: the record is taken and
    /// queued while that lock is held, so the writes of one cluster reach the store in the
    /// order of its changes. A record queued after the lock is released could be overtaken
    /// by a later one (a heartbeat's transition by the mirror feed's `Mirrored`, say) and
    /// then overwrite it for good: status is written on transitions only, so nothing
    /// would write the lost condition again.
    pub(super) fn write_status(&self, cluster: &ClusterId, state: &mut ClusterState) {
        self.mark_changed(cluster);
        self.queue_status(cluster, state);
    }

    /// [`Self::write_status`] without marking the cluster for the mirror feed: for a caller
    /// that marks it itself once what follows from the transition (the sets' evaluation)
    /// is done too, so the feed reads both at once.
    pub(super) fn queue_status(&self, cluster: &ClusterId, state: &mut ClusterState) {
        let record = state.record();
        self.metrics.status_writes.inc();
        let observed = state.transitions.observe(&record.status.conditions);
        (self.metrics.transitions).written(observed.first, &observed.changed);
        self.store.send(vec![Write::Cluster {
            cluster: cluster.clone(),
            record,
        }]);
    }
}

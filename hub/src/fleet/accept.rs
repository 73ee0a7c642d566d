//! The last step of a heartbeat's admission and its effect, under the cluster's own lock:
//! the core ([`crate::core::cluster`]) applies the replay rule (and the restart floor
//! after a start that may have lost positions) together with the decisions it guards
//! (liveness, health, key sharing); this shell records the report for the read API,
//! writes the status when a condition changed and has the sets evaluated.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::protocol::report::HeartbeatAnswer;

use fleetpulse_common::api::condition::Status;

use super::ClusterEntry;
use super::Fleet;
use super::cluster::{ClusterState, SHARED_KEY};
use crate::core::cluster::{Heartbeat, Report};
use crate::core::repeat::Shape;
use crate::refusal::Refusal;

/// A request that passed every step but the replay rule: its cluster, the key id that
/// signed it and what it claims.
#[derive(Debug)]
pub struct Admitted<T> {
    /// The cluster's entry in the registry the key was looked up in.
    pub entry: Arc<ClusterEntry>,
    /// The signing key's id.
    pub kid: String,
    /// The verified, parsed payload.
    pub claims: T,
    /// A heartbeat's: the digest of the signed text of its check results, remembered with
    /// them once the report is accepted, so that admission can take the next report
    /// signing the same text without parsing it ([`ClusterState::agent_checks`]); `None`
    /// when not known (nothing is remembered then).
    pub signed_checks: Option<u64>,
    /// A heartbeat's parsed text's shape, for a next text of that shape to be read from
    /// this report once it is accepted ([`crate::core::repeat`]); `None` when it has none
    /// or was itself read so (what is kept stays).
    pub shape: Option<Shape>,
}

impl Fleet {
    /// Applies a heartbeat that passed every other admission step: the replay rule
    /// (admission's last step), then liveness and health. Writes nothing unless the rule
    /// passed; persists status only if a condition changed.
    pub fn accept(
        &self,
        admitted: &Admitted<Report>,
        now: Instant,
        wall: Timestamp,
    ) -> Result<HeartbeatAnswer, Refusal> {
        let Admitted {
            entry,
            kid,
            claims: report,
            signed_checks,
            shape,
        } = admitted;
        let kid = kid.as_str();
        let mut state = entry.state.lock();
        // Hub-side check results join the agent's, so they gate Ready and Healthy too.
        let merged;
        let report = if state.hub_results.is_empty() {
            report
        } else {
            let checks = report.checks.iter().chain(&state.hub_results).cloned();
            merged = report.clone().with_checks(checks.collect());
            &merged
        };
        let hub_checks_ran = entry
            .hub_checks
            .iter()
            .all(|c| state.hub_results.iter().any(|r| r.name == c.name));
        let heartbeat = Heartbeat {
            kid,
            report,
            wanted_generation: state.config_generation,
            hub_checks_ran,
            paused: entry.object.spec.paused,
            floor: self.incarnation_floor(),
            debounce: self.settings.debounce,
        };
        let unheard = state.core.liveness.last_heartbeat().is_none();
        let accepted = state.core.heartbeat(heartbeat, now, wall)?;
        if unheard {
            // The first this hub process heard of it: its mirrors may show its health now.
            self.mark_changed(&entry.id);
        }
        let pos = accepted.position;
        state.positions_dirty = true;
        let previous = state.last_heartbeat;
        (state.history).heard(previous, wall, entry.object.spec.heartbeat.interval_seconds);
        state.record_heartbeat(kid, report, wall);
        state.recorded_agent_checks(*signed_checks, admitted.claims.checks.len());
        if let (Some(shape), Some(checks)) = (shape, signed_checks) {
            state.keep_report(shape.clone(), &admitted.claims, *checks);
        }
        let changed = accepted.health_changed
            | self.watch_sharing(&mut state, kid, accepted.shared_key, wall);
        let answer = HeartbeatAnswer {
            incarnation: pos.incarnation,
            accepted_seq: pos.seq,
            config_generation: state.config_generation,
            interval_seconds: entry.object.spec.heartbeat.interval_seconds,
            // Only an enrolled key rotates: a pre-shared one (listed in the spec) skips the
            // enrolment store on the heartbeat path.
            rotate_key: !entry.lists_key(kid)
                && self
                    .enrolled_keys()
                    .is_some_and(|keys| keys.rotation_requested(&entry.id)),
        };
        if changed {
            self.queue_status(&entry.id, &mut state);
        }
        drop(state);
        if changed {
            tracing::info!(cluster = %entry.id, seq = pos.seq, "cluster conditions changed on report");
            self.evaluate_sets(wall);
            // Marked for the mirror feed only now: a sync between the transition and the
            // sets' evaluation would write the cluster's mirrors twice (healthy, then
            // selected) where one write says both.
            self.mark_changed(&entry.id);
        }
        Ok(answer)
    }

    /// Shows the key-sharing verdict ([`crate::core::shared_key`]): `SharedKey` True
    /// while two agents seem to sign with `kid`, False once that stopped. Returns whether
    /// the condition changed.
    fn watch_sharing(
        &self,
        state: &mut ClusterState,
        kid: &str,
        shared: bool,
        wall: Timestamp,
    ) -> bool {
        let was = state.extra_status(SHARED_KEY);
        let message;
        let value = match (shared, was) {
            (true, Status::True) | (false, Status::False | Status::Unknown) => return false,
            (true, _) => {
                message = format!(
                    "key {kid} is used by two running agents: they restarted just above each \
                     other's position {} times in the last {} reports; give this cluster's \
                     agent its own key (`fleetpulse-agent keygen`, or a new bootstrap token) and \
                     stop the copy",
                    state.core.sharing.restarts(),
                    crate::core::shared_key::WINDOW
                );
                tracing::error!(%kid, "two agents seem to share one key");
                (Status::True, "TwoAgentsOneKey", message.as_str())
            }
            (false, _) => (
                Status::False,
                "OneAgentPerKey",
                "one agent signs with the key",
            ),
        };
        state.set_extra(SHARED_KEY, Some(value), wall)
    }
}

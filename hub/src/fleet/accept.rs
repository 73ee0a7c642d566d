//! The last step of a heartbeat's admission and its effect: the replay rule, checked
//! under the cluster's own lock together with the state update it guards (liveness,
//! health, and a status write when a condition changed).

use std::time::Instant;

use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::protocol::replay::{self, Position};
use fleetpulse_common::protocol::report::{HeartbeatAnswer, HeartbeatReport};

use super::Fleet;
use crate::admission::{Admitted, Refusal};
use crate::core::health::Evidence;

impl Fleet {
    /// Applies a heartbeat that passed every other admission step: the replay rule
    /// (admission's last step), then liveness and health. Writes nothing unless the rule
    /// passed; persists status only if a condition changed.
    pub fn accept(
        &self,
        admitted: &Admitted<HeartbeatReport>,
        now: Instant,
        wall: Timestamp,
    ) -> Result<HeartbeatAnswer, Refusal> {
        let Admitted {
            entry,
            kid,
            claims: report,
        } = admitted;
        let kid = kid.as_str();
        let mut state = entry.state.lock();
        let last = state.positions.get(kid).copied();
        let pos = replay::check_sequence(
            Position {
                incarnation: report.incarnation,
                seq: report.seq,
            },
            last,
        )?;
        // Overwrite in place: no key-id allocation per heartbeat once a key is known.
        match state.positions.get_mut(kid) {
            Some(known) => *known = pos,
            None => {
                state.positions.insert(kid.to_owned(), pos);
            }
        }
        // Hub-side check results join the agent's, so they gate Ready and Healthy too.
        let merged;
        let report = if state.hub_results.is_empty() {
            report
        } else {
            let mut with_hub = report.clone();
            with_hub.checks.extend(state.hub_results.iter().cloned());
            merged = with_hub;
            &merged
        };
        state.positions_dirty = true;
        state.record_heartbeat(kid, report, now, wall);
        let hub_checks_ran = entry
            .hub_checks
            .iter()
            .all(|(_, c)| state.hub_results.iter().any(|r| r.name == c.name));
        let evidence = Evidence::of(
            report.config_generation,
            state.config_generation,
            hub_checks_ran,
        );
        let changed = !entry.object.spec.paused
            && state
                .health
                .report(report, evidence, self.settings.debounce, wall);
        let answer = HeartbeatAnswer {
            incarnation: pos.incarnation,
            accepted_seq: pos.seq,
            config_generation: state.config_generation,
            interval_seconds: entry.object.spec.heartbeat.interval_seconds,
            rotate_key: self
                .enrolled_keys()
                .is_some_and(|keys| keys.rotation_requested(&entry.id)),
        };
        let write = changed.then(|| state.record());
        drop(state);
        if let Some(record) = write {
            tracing::info!(cluster = %entry.id, seq = pos.seq, "cluster conditions changed on report");
            self.write_status(&entry.id, record);
            self.evaluate_sets(wall);
        }
        Ok(answer)
    }
}

//! Admission of a heartbeat: the key rules (known, bound to the URL's cluster, not
//! revoked) before any cryptography, then, once the signature verified, the replay rules
//! and the state update under the cluster's own lock.

use std::sync::Arc;
use std::time::Instant;

use ed25519_dalek::VerifyingKey;
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::replay::{self, Rejection};
use fleetpulse_common::protocol::report::{ClusterId, HeartbeatAnswer, HeartbeatReport};

use super::{ClusterEntry, Fleet};
use crate::health::Evidence;

fn reject(code: RejectCode, message: String) -> Rejection {
    Rejection {
        code,
        message,
        last_accepted: None,
    }
}

impl Fleet {
    /// Finds the cluster and the key a JWS claims, applying the key rules: the key must
    /// exist, be bound to this cluster, and not be revoked.
    pub fn lookup(
        &self,
        cluster: &ClusterId,
        kid: &str,
    ) -> Result<(Arc<ClusterEntry>, VerifyingKey), Rejection> {
        let registry = self.registry();
        let Some(entry) = registry.cluster(cluster) else {
            return Err(reject(
                RejectCode::UnknownCluster,
                format!(
                    "no MemberCluster {cluster} on this hub; create it, or fix the agent's --cluster"
                ),
            ));
        };
        let Some(binding) = registry.key(kid) else {
            if let Some(found) = self.enrolled.get().and_then(|e| e.lookup(cluster, kid)) {
                return found.map(|key| (entry.clone(), key));
            }
            return Err(reject(
                RejectCode::UnknownKey,
                format!(
                    "key {kid} is not in spec.agent.publicKeys of any MemberCluster; add the \
                     agent's public key to MemberCluster {cluster}"
                ),
            ));
        };
        if binding.cluster != *cluster {
            return Err(reject(
                RejectCode::KeyNotForCluster,
                format!(
                    "key {kid} belongs to MemberCluster {}, not {cluster}",
                    binding.cluster
                ),
            ));
        }
        if binding.revoked {
            return Err(reject(
                RejectCode::KeyRevoked,
                format!(
                    "key {kid} of MemberCluster {cluster} is revoked; give the agent a new key"
                ),
            ));
        }
        Ok((entry.clone(), binding.key))
    }

    /// Admits a verified report and applies it: replay rules, liveness, health. Writes
    /// nothing unless every rule passed; persists status only if a condition changed.
    pub fn accept(
        &self,
        entry: &ClusterEntry,
        kid: &str,
        report: &HeartbeatReport,
        now: Instant,
        wall: Timestamp,
    ) -> Result<HeartbeatAnswer, Rejection> {
        let mut state = entry.state.lock();
        let last = state.positions.get(kid).copied();
        let pos = replay::admit(
            report,
            &self.settings.audience,
            &entry.id,
            last,
            wall.as_second(),
            self.settings.freshness,
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

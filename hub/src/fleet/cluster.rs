//! One cluster's runtime state on the hub: liveness, health, accepted positions per key,
//! and what its last report said. Lives in memory; [`ClusterState::record`] is what the
//! store keeps (written on transitions).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::condition::{self, Status};
use fleetpulse_common::api::{AgentStatus, CheckResult, MemberClusterStatus};
use fleetpulse_common::protocol::replay::Position;

use crate::core::cluster::{ClusterCore, Report};
use crate::core::digest;
use crate::core::health::Health;
use crate::core::repeat::Shape;

/// The conditions a [`ClusterState`] keeps outside the health core.
pub const EXTRA: [&str; 5] = [
    condition::ACCEPTED,
    condition::MIRRORED,
    SHARED_KEY,
    condition::ENROLLED,
    condition::ADOPTED,
];
/// `SharedKey`: True while two running agents seem to sign with the cluster's key.
pub const SHARED_KEY: &str = "SharedKey";
use crate::store::StoredCluster;

/// A report kept to read the next texts of its shape from.
#[derive(Debug)]
struct Kept {
    shape: Shape,
    report: Report,
    checks: u64,
}

/// Runtime state of one cluster.
#[derive(Debug)]
pub struct ClusterState {
    /// Liveness, health, accepted positions and the key-sharing watch: what the core
    /// decides on.
    pub core: ClusterCore,
    /// Positions changed since the last flush to the store.
    pub positions_dirty: bool,
    /// Generation of the effective config served to the agent.
    pub config_generation: u64,
    /// Hash of the effective config that generation stands for (0: none yet).
    pub config_hash: u64,
    /// Latest results of the hub-side checks.
    pub hub_results: Vec<fleetpulse_common::protocol::report::CheckResult>,
    /// When the hub-side checks run next.
    pub hub_next_run: Option<Instant>,
    /// Each hub-side check and its verdict over time.
    pub hub_trackers: std::collections::BTreeMap<
        String,
        (
            std::sync::Arc<fleetpulse_common::checks::model::Check>,
            fleetpulse_common::checks::timing::Tracker,
        ),
    >,
    pub(super) last_heartbeat: Option<Timestamp>,
    agent: Option<AgentStatus>,
    /// Shared with the report they came from and with a next report signing the same text.
    checks: Arc<[CheckResult]>,
    /// Digest of what the last recorded report said of the agent and its checks
    /// ([`Recorded`]; `None`: nothing recorded by this process yet).
    recorded: Option<u64>,
    /// Digest of the signed text of the agent's check results in the last recorded report,
    /// and how many of [`Self::checks`] they are (the rest are the hub-side checks').
    agent_checks: Option<(u64, usize)>,
    /// The last accepted report whose signed text has a [`Shape`], with that shape and the
    /// digest of its check results' text: a next text of that shape is read from it
    /// ([`Self::repeated`]).
    kept: Option<Box<Kept>>,
    /// Conditions set outside the health core: `Mirrored` (a cluster with mirrors),
    /// `SharedKey` (once suspected) and `Enrolled` (a cluster that enrols with a token),
    /// kept apart from the health conditions.
    extra: Vec<Condition>,
    /// The statuses last written and the recent transitions (`describe`).
    pub transitions: super::transitions::TransitionLog,
    /// Recent check result changes and heartbeat gaps (the console).
    pub history: super::history::ClusterHistory,
    /// The term of this replica's ownership of the cluster's shard the detector last
    /// judged it in (0: not yet, or replicas do not share the fleet).
    pub shard_term: u64,
}

impl ClusterState {
    /// State for a cluster first seen at `now`, restored from the store when it has a
    /// record (conditions, agent, config generation) and positions.
    pub fn restore(
        now: Instant,
        wall: Timestamp,
        record: Option<StoredCluster>,
        positions: HashMap<String, Position>,
    ) -> Self {
        let record = record.unwrap_or_default();
        let status = record.status;
        let uid = status.agent.as_ref().map(|a| a.cluster_uid.clone());
        let (extra, conditions) = (status.conditions.into_iter())
            .partition(|c: &Condition| EXTRA.contains(&c.type_.as_str()));
        Self {
            core: ClusterCore::new(now, Health::restore(conditions, uid, wall), positions),
            positions_dirty: false,
            config_generation: status.config_generation.unwrap_or(0),
            config_hash: record.config_hash,
            hub_results: Vec::new(),
            hub_next_run: None,
            hub_trackers: Default::default(),
            last_heartbeat: status.last_heartbeat_time.map(|t| t.0),
            agent: status.agent,
            checks: status.checks.into(),
            recorded: None,
            agent_checks: None,
            kept: None,
            extra,
            transitions: Default::default(),
            history: Default::default(),
            shard_term: 0,
        }
    }

    /// Takes over that a previous hub process last accepted a report from the cluster at
    /// `heard` (on the wall clock; `now` and `wall` are this moment): the read API's
    /// `lastHeartbeatTime` and the partition brake go on from it.
    pub fn carry_over(&mut self, heard: Timestamp, now: Instant, wall: Timestamp) {
        let ago = wall.duration_since(heard);
        let ago = std::time::Duration::try_from(ago).unwrap_or_default();
        if let Some(heard_at) = now.checked_sub(ago) {
            self.core.liveness.carry_over(heard_at, now);
        }
        if self.last_heartbeat.is_none_or(|last| last < heard) {
            self.last_heartbeat = Some(heard);
        }
    }

    /// Sets a condition kept outside the health core (one of [`EXTRA`]); `None` removes
    /// it. Returns whether it changed.
    pub fn set_extra(
        &mut self,
        type_: &str,
        value: Option<(Status, &str, &str)>,
        wall: Timestamp,
    ) -> bool {
        match value {
            Some((status, reason, message)) => {
                condition::set(&mut self.extra, type_, status, reason, message, wall)
            }
            None => {
                let before = self.extra.len();
                self.extra.retain(|c| c.type_ != type_);
                self.extra.len() != before
            }
        }
    }

    /// The status of a condition kept outside the health core.
    pub fn extra_status(&self, type_: &str) -> Status {
        condition::find(&self.extra, type_).map_or(Status::Unknown, |c| Status::parse(&c.status))
    }

    /// Records what an accepted report says for the read API (when, agent, check results).
    /// A report that says what the last one did (by digest) changes nothing else, and is
    /// told apart without reading the recorded strings.
    pub fn record_heartbeat(&mut self, kid: &str, report: &Report, wall: Timestamp) {
        self.last_heartbeat = Some(wall);
        let recorded = digest::of(Recorded { kid, report });
        if self.recorded == Some(recorded) {
            return;
        }
        self.recorded = Some(recorded);
        let agent = self.agent.get_or_insert_with(AgentStatus::default);
        if agent.key_id != kid
            || agent.version != report.agent_version
            || agent.cluster_uid != report.cluster_uid
            || agent.incarnation != report.incarnation
        {
            *agent = AgentStatus {
                version: report.agent_version.clone(),
                key_id: kid.to_owned(),
                cluster_uid: report.cluster_uid.clone(),
                incarnation: report.incarnation,
            };
        }
        // Only a report that differs gets here (the digest passed over the rest), so the
        // results are taken whole (shared with the report, not copied).
        for (i, c) in report.checks.iter().enumerate() {
            let kept = self.checks.get(i);
            if kept.is_none_or(|k| {
                k.passing != c.passing || k.message != c.message || k.name != c.name
            }) {
                self.history
                    .check_changed(&c.name, c.passing, &c.message, wall);
            }
        }
        self.checks = report.checks.clone();
    }

    /// Remembers that the report just recorded carried `len` check results of the agent's,
    /// signed as a text of digest `raw` ([`fleetpulse_common::protocol::report::RawChecks`];
    /// `None`: not known, and what was remembered is forgotten).
    pub fn recorded_agent_checks(&mut self, raw: Option<u64>, len: usize) {
        self.agent_checks = raw.map(|raw| (raw, len));
    }

    /// Keeps `report` (the agent's, as admitted) and the `shape` of its signed text, with
    /// `checks`, the digest of its check results' text, for [`Self::repeated`].
    pub fn keep_report(&mut self, shape: Shape, report: &Report, checks: u64) {
        self.kept = Some(Box::new(Kept {
            shape,
            report: report.clone(),
            checks,
        }));
    }

    /// What `text` says, if it is the text of the kept report with other position and
    /// times ([`crate::core::repeat`]): that report with them, and the digest of its check
    /// results' text.
    pub fn repeated(&self, text: &[u8]) -> Option<(Report, u64)> {
        let kept = self.kept.as_deref()?;
        let numbers = kept.shape.read(text)?;
        let report = Report {
            seq: numbers.seq,
            iat: numbers.iat,
            exp: numbers.exp,
            ..kept.report.clone()
        };
        Some((report, kept.checks))
    }

    /// The agent's check results of the last recorded report, if their signed text had the
    /// digest `raw`: what a report signing the same text says, without parsing it again.
    /// Shared, not copied, unless hub-side results follow them in the record.
    pub fn agent_checks(&self, raw: u64) -> Option<Arc<[CheckResult]>> {
        match self.agent_checks {
            Some((kept, len)) if kept == raw && len == self.checks.len() => {
                Some(self.checks.clone())
            }
            Some((kept, len)) if kept == raw => self.checks.get(..len).map(Arc::from),
            _ => None,
        }
    }

    /// The checks the last report said failed a run (a check that has not run yet is not
    /// failing), while the cluster is reachable: an unreachable cluster's last results say
    /// nothing about its checks now.
    pub fn failing_checks(&self) -> Vec<String> {
        if self.core.health.status(condition::REACHABLE) != Status::True {
            return Vec::new();
        }
        let failing = (self.checks.iter()).filter(|c| !c.passing && c.consecutive_failures > 0);
        failing.map(|c| c.name.clone()).collect()
    }

    /// The latest result of every check the last report carried.
    pub fn checks(&self) -> &[CheckResult] {
        &self.checks
    }

    /// Reachable but not Healthy: what a cluster is while its checks recover.
    pub fn recovering(&self) -> bool {
        let health = &self.core.health;
        health.status(condition::REACHABLE) == Status::True
            && health.status(condition::HEALTHY) != Status::True
    }

    /// The status as shown live (read API): everything known right now.
    pub fn live_status(&self) -> MemberClusterStatus {
        MemberClusterStatus {
            conditions: (self.core.health.conditions().iter())
                .chain(&self.extra)
                .cloned()
                .collect(),
            last_heartbeat_time: self.last_heartbeat.map(Time),
            agent: self.agent.clone(),
            checks: self.checks.to_vec(),
            config_generation: (self.config_generation > 0).then_some(self.config_generation),
            config_hash: (self.config_hash != 0).then(|| format!("{:016x}", self.config_hash)),
            observed_generation: None,
            mirrors: Vec::new(),
        }
    }

    /// What the store keeps for this cluster.
    pub fn record(&self) -> StoredCluster {
        StoredCluster {
            status: self.live_status(),
            config_hash: self.config_hash,
        }
    }
}

/// What [`ClusterState::record_heartbeat`] keeps of a report, for its digest: the
/// signing key, the agent's fields and every field of every check result.
struct Recorded<'a> {
    kid: &'a str,
    report: &'a Report,
}

impl Hash for Recorded<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let report = self.report;
        self.kid.hash(h);
        report.agent_version.hash(h);
        report.cluster_uid.hash(h);
        report.incarnation.hash(h);
        report.checks.len().hash(h);
        for c in report.checks.iter() {
            // Exhaustive, so that a new field cannot be left out.
            let CheckResult {
                name,
                kind,
                phase,
                passing,
                message,
                since,
                consecutive_failures,
                success_rate_percent,
            } = c;
            name.hash(h);
            kind.hash(h);
            phase.hash(h);
            passing.hash(h);
            message.hash(h);
            since.as_ref().map(|t| t.0.as_nanosecond()).hash(h);
            consecutive_failures.hash(h);
            success_rate_percent.map(f64::to_bits).hash(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetpulse_common::api::{CheckKind, CheckPhase};
    use fleetpulse_common::protocol::report::CheckResult;

    fn report(checks: &[(&str, bool, &str)]) -> Report {
        let checks = checks
            .iter()
            .map(|(name, passing, message)| CheckResult {
                name: (*name).into(),
                kind: CheckKind::Lua,
                phase: CheckPhase::Liveness,
                passing: *passing,
                message: (*message).into(),
                since: None,
                consecutive_failures: u32::from(!passing),
                success_rate_percent: None,
            })
            .collect();
        crate::core::health::tests::report("uid", checks)
    }

    #[test]
    fn recorded_checks_are_exactly_the_last_reports_whatever_came_before() {
        let now = Instant::now();
        let wall = Timestamp::UNIX_EPOCH;
        let mut state = ClusterState::restore(now, wall, None, HashMap::new());
        let sequence = [
            report(&[("a", true, "ok"), ("b", true, "fine")]),
            report(&[
                ("a", false, "a much longer message than before"),
                ("b", true, ""),
            ]),
            report(&[("c", true, "only one now")]),
            report(&[("c", true, "x"), ("d", false, "new"), ("e", true, "newer")]),
        ];
        for r in &sequence {
            state.record_heartbeat("kid", r, wall);
            let recorded: Vec<(String, bool, String, u32)> = state
                .live_status()
                .checks
                .into_iter()
                .map(|c| (c.name, c.passing, c.message, c.consecutive_failures))
                .collect();
            let expected: Vec<(String, bool, String, u32)> = r
                .checks
                .iter()
                .map(|c| {
                    (
                        c.name.clone(),
                        c.passing,
                        c.message.clone(),
                        c.consecutive_failures,
                    )
                })
                .collect();
            assert_eq!(recorded, expected);
        }
    }

    #[test]
    fn a_repeated_report_is_recorded_once_and_a_changed_number_is_recorded() {
        let now = Instant::now();
        let wall = Timestamp::UNIX_EPOCH;
        let mut state = ClusterState::restore(now, wall, None, HashMap::new());
        let first = report(&[("a", false, "down"), ("b", true, "ok")]);
        state.record_heartbeat("kid", &first, wall);
        state.record_heartbeat("kid", &first, wall);
        assert_eq!(state.checks(), &first.checks[..]);
        assert_eq!(
            state.history.check_changes().len(),
            2,
            "each check's first result, once"
        );
        let mut checks = first.checks.to_vec();
        checks[0].consecutive_failures = 7;
        checks[1].since = Some(Time(Timestamp::from_second(60).unwrap()));
        checks[1].success_rate_percent = Some(99.5);
        let counted = first.clone().with_checks(checks.into());
        state.record_heartbeat("kid", &counted, wall);
        assert_eq!(state.checks(), &counted.checks[..]);
        assert_eq!(state.history.check_changes().len(), 2, "no result changed");
        state.record_heartbeat("other-kid", &counted, wall);
        assert_eq!(state.agent.as_ref().unwrap().key_id, "other-kid");
    }

    #[test]
    fn the_agents_checks_are_handed_back_only_for_the_text_they_were_recorded_with() {
        let (now, wall) = (Instant::now(), Timestamp::UNIX_EPOCH);
        let mut state = ClusterState::restore(now, wall, None, HashMap::new());
        assert_eq!(state.agent_checks(7), None, "nothing recorded yet");
        // Two of the agent's, then one of the hub's appended to the report as recorded.
        let merged = report(&[("a", true, "ok"), ("b", false, "down"), ("hub", true, "")]);
        state.record_heartbeat("kid", &merged, wall);
        state.recorded_agent_checks(Some(7), 2);
        assert_eq!(state.agent_checks(7).as_deref(), Some(&merged.checks[..2]));
        assert_eq!(state.agent_checks(8), None, "another text");
        let next = report(&[("a", false, "changed")]);
        state.record_heartbeat("kid", &next, wall);
        state.recorded_agent_checks(None, 1);
        assert_eq!(
            state.agent_checks(7),
            None,
            "forgotten with the results they were"
        );
        // With no hub-side results after them, the report's own results are handed back.
        state.recorded_agent_checks(Some(9), 1);
        let kept = state.agent_checks(9).expect("recorded with text 9");
        assert!(Arc::ptr_eq(&kept, &next.checks), "shared, not copied");
    }
}

//! The health state machine: turns the detector's verdicts and accepted reports into the
//! `Reachable`, `Ready` and `Healthy` conditions of a MemberCluster.
//!
//! - `Reachable` follows the failure detector.
//! - `Ready` latches: it turns True the first time a report from a reachable cluster has
//!   every readiness check passing and then stays True, so a transient failure never
//!   makes a cluster ineligible. Only a report made with the config the hub currently
//!   wants for the cluster ([`Evidence::Current`]) can latch it: an agent's first report,
//!   sent before it pulled its checks, carries none and proves nothing. It resets only when the cluster UID changes (the cluster
//!   was rebuilt behind the same name).
//! - `Healthy` is the debounced current state: False at once when the cluster becomes
//!   unreachable (the detector already waited a grace period) or is not ready; otherwise it
//!   follows the liveness checks, but only after the new value held for
//!   `healthy_after` / `unhealthy_after` consecutive reports.
//!
//! Pure: every input carries `now`. Messages name failing checks, not their changing
//! details, so conditions change only on transitions (the hub writes O(transitions)).

use std::fmt::Display;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::CheckPhase;
use fleetpulse_common::api::condition::{self, HEALTHY, REACHABLE, READY, Status};

use crate::core::cluster::Report;
use crate::core::detector::Reachability;
use crate::core::digest;

/// How many consecutive reports a new liveness verdict must hold before `Healthy` follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Debounce {
    /// Reports with every liveness check passing before an unhealthy cluster is Healthy.
    pub healthy_after: u32,
    /// Reports with a failing liveness check before a healthy cluster is unhealthy.
    pub unhealthy_after: u32,
}

impl Default for Debounce {
    fn default() -> Self {
        Self {
            healthy_after: 2,
            unhealthy_after: 2,
        }
    }
}

/// Reasons, stable strings as they appear in conditions.
pub mod reason {
    /// No heartbeat yet.
    pub const AWAITING_FIRST_HEARTBEAT: &str = "AwaitingFirstHeartbeat";
    /// A heartbeat was accepted within the grace period.
    pub const HEARTBEAT_RECEIVED: &str = "HeartbeatReceived";
    /// The grace period passed without an accepted heartbeat.
    pub const HEARTBEAT_MISSED: &str = "HeartbeatMissed";
    /// Every readiness check passed once.
    pub const READINESS_CHECKS_PASSED: &str = "ReadinessChecksPassed";
    /// A readiness check has not passed yet.
    pub const READINESS_CHECKS_FAILING: &str = "ReadinessChecksFailing";
    /// The cluster UID changed: a new cluster behind the same name must become ready again.
    pub const CLUSTER_REPLACED: &str = "ClusterReplaced";
    /// Every liveness check passes.
    pub const ALL_CHECKS_PASSING: &str = "AllChecksPassing";
    /// A liveness check fails.
    pub const LIVENESS_CHECKS_FAILING: &str = "LivenessChecksFailing";
    /// The cluster is unreachable.
    pub const UNREACHABLE: &str = "Unreachable";
    /// The cluster is not ready.
    pub const NOT_READY: &str = "NotReady";
    /// The agent has not yet reported with the checks the hub wants it to run.
    pub const AWAITING_CONFIG: &str = "AwaitingConfig";
}

/// Whether a report can prove readiness: was it made with every check the hub currently
/// wants for the cluster?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evidence {
    /// Made with the current config generation, and every hub-side check has run.
    Current,
    /// Made with config generation `applied` while the hub wants `wanted` (or, with
    /// `applied == wanted`, before the hub-side checks of that generation ran): it updates
    /// liveness, never readiness.
    Behind {
        /// The generation the report says the agent applied.
        applied: u64,
        /// The generation the hub serves.
        wanted: u64,
    },
}

impl Evidence {
    /// The evidence of a report made with `applied` when the hub wants `wanted`;
    /// `hub_checks_ran` says whether every hub-side check of the cluster has a result.
    pub fn of(applied: u64, wanted: u64, hub_checks_ran: bool) -> Self {
        if applied >= wanted && hub_checks_ran {
            Evidence::Current
        } else {
            Evidence::Behind { applied, wanted }
        }
    }
}

/// The conditions health keeps, in the order [`Health::conditions`] lists them for a new
/// cluster.
const TYPES: [&str; 3] = [REACHABLE, READY, HEALTHY];

/// A cluster's health: its conditions plus the debounce memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Health {
    conditions: Vec<Condition>,
    /// The status of `Reachable`, `Ready` and `Healthy`, typed: kept with `conditions` by
    /// [`Health::set`], the one place a condition changes, so reading one never parses.
    statuses: [Status; 3],
    /// What each of them says, digested ([`digest::of_said`]): a heartbeat that repeats
    /// them is told apart without reading the conditions' strings.
    said: Said,
    cluster_uid: Option<String>,
    /// The liveness verdict that differs from `Healthy`, and for how many reports it held.
    streak: Option<(bool, u32)>,
}

/// The digests of what `Reachable`, `Ready` and `Healthy` say and of the cluster UID last
/// reported (`None`: not known yet, as after a restore). A cache of the conditions, not
/// part of the health's value: two healths are equal whatever their caches hold.
#[derive(Clone, Debug, Default)]
struct Said {
    conditions: [Option<u64>; 3],
    cluster_uid: Option<u64>,
}

impl PartialEq for Said {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Health {
    /// Health restored from a persisted status (conditions and last known cluster UID), or
    /// a new cluster's (all conditions Unknown) when there is none.
    pub fn restore(
        conditions: Vec<Condition>,
        cluster_uid: Option<String>,
        now: Timestamp,
    ) -> Self {
        let statuses = TYPES.map(|type_| {
            condition::find(&conditions, type_)
                .map_or(Status::Unknown, |c| Status::parse(&c.status))
        });
        let mut h = Health {
            conditions,
            statuses,
            said: Said::default(),
            cluster_uid,
            streak: None,
        };
        for type_ in TYPES {
            if condition::find(&h.conditions, type_).is_none() {
                h.set(
                    type_,
                    Status::Unknown,
                    reason::AWAITING_FIRST_HEARTBEAT,
                    "no heartbeat accepted yet",
                    now,
                );
            }
        }
        h
    }

    /// The conditions, in the order Reachable, Ready, Healthy.
    pub fn conditions(&self) -> &[Condition] {
        &self.conditions
    }

    /// The status of one condition.
    pub fn status(&self, type_: &str) -> Status {
        match TYPES.iter().position(|t| *t == type_) {
            Some(i) => self.statuses[i],
            None => Status::Unknown,
        }
    }

    /// Sets one of the conditions ([`condition::set`]) and its typed status. Returns true
    /// if anything changed. A condition already saying `reason` and `message` with
    /// `status` (by its digest) is left as it is without reading it.
    fn set(
        &mut self,
        type_: &'static str,
        status: Status,
        reason: &str,
        message: impl Display,
        now: Timestamp,
    ) -> bool {
        let i = TYPES.iter().position(|t| *t == type_);
        let i = i.expect("health sets only Reachable, Ready and Healthy");
        let said = digest::of_said(reason, &message);
        if self.statuses[i] == status && self.said.conditions[i] == Some(said) {
            return false;
        }
        self.statuses[i] = status;
        self.said.conditions[i] = Some(said);
        let message = message.to_string();
        condition::set(&mut self.conditions, type_, status, reason, &message, now)
    }

    /// The reason of one condition.
    fn reason(&self, type_: &str) -> Option<&str> {
        condition::find(&self.conditions, type_).map(|c| c.reason.as_str())
    }

    /// Applies the detector's verdict. Returns true if a condition changed.
    pub fn observe(&mut self, verdict: Reachability, grace_secs: u32, now: Timestamp) -> bool {
        let Reachability::Unreachable {
            silent_for,
            ever_reported,
        } = verdict
        else {
            return false;
        };
        if self.status(REACHABLE) == Status::False {
            return false;
        }
        let message = if ever_reported {
            format!(
                "no heartbeat accepted for {}s (grace period {grace_secs}s)",
                silent_for.as_secs()
            )
        } else {
            format!(
                "no heartbeat accepted in the {}s since the hub started watching this cluster \
                 (grace period {grace_secs}s); check that its agent runs and can reach the hub",
                silent_for.as_secs()
            )
        };
        self.set(
            REACHABLE,
            Status::False,
            reason::HEARTBEAT_MISSED,
            message,
            now,
        );
        self.set(
            HEALTHY,
            Status::False,
            reason::UNREACHABLE,
            "the cluster is unreachable",
            now,
        );
        self.streak = None;
        true
    }

    /// Applies an accepted report (which is also a heartbeat). Returns true if a condition
    /// changed. Readiness is judged only on [`Evidence::Current`].
    pub fn report(
        &mut self,
        report: &Report,
        evidence: Evidence,
        debounce: Debounce,
        now: Timestamp,
    ) -> bool {
        let mut changed = self.set(
            REACHABLE,
            Status::True,
            reason::HEARTBEAT_RECEIVED,
            format_args!("the agent reports every {}s", report.interval_seconds),
            now,
        );
        changed |= self.watch_uid(&report.cluster_uid, now);
        if self.status(READY) != Status::True {
            changed |= match evidence {
                Evidence::Current => self.judge_readiness(report, now),
                Evidence::Behind { applied, wanted } => self.await_config(applied, wanted, now),
            };
        }
        changed | self.judge_liveness(report, debounce, now)
    }

    /// Keeps the cluster UID reported; a different one from a ready cluster resets
    /// `Ready`. The UID last reported (by digest) is passed over without reading the kept one.
    fn watch_uid(&mut self, uid: &str, now: Timestamp) -> bool {
        let said = digest::of(uid);
        if self.said.cluster_uid == Some(said) {
            return false;
        }
        let mut changed = false;
        if let Some(known) = &self.cluster_uid
            && !known.is_empty()
            && !uid.is_empty()
            && known != uid
            && self.status(READY) == Status::True
        {
            changed = self.set(
                READY,
                Status::False,
                reason::CLUSTER_REPLACED,
                format!("cluster UID changed from {known} to {uid}; readiness is checked again"),
                now,
            );
            self.streak = None;
        }
        if self.cluster_uid.as_deref() != Some(uid) {
            self.cluster_uid = Some(uid.to_owned());
        }
        self.said.cluster_uid = Some(said);
        changed
    }

    fn judge_readiness(&mut self, report: &Report, now: Timestamp) -> bool {
        let failing = failing_names(report, CheckPhase::Readiness);
        if failing.is_empty() {
            self.set(
                READY,
                Status::True,
                reason::READINESS_CHECKS_PASSED,
                "every readiness check passed",
                now,
            )
        } else if self.reason(READY) == Some(reason::CLUSTER_REPLACED) {
            false
        } else {
            let message = format!("waiting for readiness checks: {failing}");
            self.set(
                READY,
                Status::False,
                reason::READINESS_CHECKS_FAILING,
                message,
                now,
            )
        }
    }

    /// Ready stays not True until a report made with the current config arrives.
    fn await_config(&mut self, applied: u64, wanted: u64, now: Timestamp) -> bool {
        if self.reason(READY) == Some(reason::CLUSTER_REPLACED) {
            return false;
        }
        let message = if applied < wanted {
            format!(
                "waiting for a report made with config generation {wanted} (the agent reports \
                 generation {applied}); readiness is judged on the checks the hub serves"
            )
        } else {
            "waiting for the first run of the hub-side checks".to_owned()
        };
        self.set(READY, Status::False, reason::AWAITING_CONFIG, message, now)
    }

    fn judge_liveness(&mut self, report: &Report, debounce: Debounce, now: Timestamp) -> bool {
        if self.status(READY) != Status::True {
            self.streak = None;
            return self.set(
                HEALTHY,
                Status::False,
                reason::NOT_READY,
                "the cluster is not ready",
                now,
            );
        }
        let failing = failing_names(report, CheckPhase::Liveness);
        let live = failing.is_empty();
        if self.status(HEALTHY) == Status::from(live) {
            self.streak = None;
            // Already unhealthy for another reason (it was unreachable, or not ready): the
            // checks that fail now are the reason, at once (no transition, no debounce).
            let stale =
                (self.reason(HEALTHY)).is_some_and(|r| r != reason::LIVENESS_CHECKS_FAILING);
            return !live && stale && self.liveness_failing(&failing, now);
        }
        let held = match self.streak {
            Some((verdict, n)) if verdict == live => n + 1,
            _ => 1,
        };
        let needed = if live {
            debounce.healthy_after
        } else {
            debounce.unhealthy_after
        };
        if held < needed {
            self.streak = Some((live, held));
            return false;
        }
        self.streak = None;
        if live {
            let message = "reachable, ready, and every liveness check passes";
            self.set(
                HEALTHY,
                Status::True,
                reason::ALL_CHECKS_PASSING,
                message,
                now,
            )
        } else {
            self.liveness_failing(&failing, now)
        }
    }

    /// `Healthy=False` because the liveness checks `failing` fail.
    fn liveness_failing(&mut self, failing: &str, now: Timestamp) -> bool {
        let message = format!("failing liveness checks: {failing}");
        self.set(
            HEALTHY,
            Status::False,
            reason::LIVENESS_CHECKS_FAILING,
            message,
            now,
        )
    }
}

fn failing_names(report: &Report, phase: CheckPhase) -> String {
    let names: Vec<&str> = report
        .checks
        .iter()
        .filter(|c| c.phase == phase && !c.passing)
        .map(|c| c.name.as_str())
        .collect();
    names.join(", ")
}

#[cfg(test)]
pub(crate) mod tests;

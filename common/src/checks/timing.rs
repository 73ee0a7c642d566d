//! The verdict of one check over time, in the kubelet's vocabulary: a run outcome counts
//! only after `failureThreshold` consecutive failures (and, with `for`/`duration`, after
//! failing continuously that long), and a failing check passes again after
//! `successThreshold` consecutive successes. Pure: every call takes `now`.
//!
//! Before its first run a readiness check is failing (nothing proved it yet) and a
//! liveness check is passing (as the kubelet assumes), both with the message "not run yet".

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::RunOutcome;
use super::model::Check;
use crate::api::{CheckKind, CheckPhase, ClusterCheck};
use crate::protocol::report::CheckResult;

/// The timing fields of a check, with defaults applied ([`super::model::Check::parse`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// How often it runs (`periodSeconds`); `None`: every heartbeat interval.
    pub period: Option<Duration>,
    /// How long one run may take (`timeoutSeconds`); `None`: the runner's default (the
    /// agent's Lua deadline for Lua checks, 5 s for probes).
    pub timeout: Option<Duration>,
    /// Consecutive failed runs before the check counts as failing (default 1).
    pub failure_threshold: u32,
    /// Consecutive successful runs before a failing check passes (default 1).
    pub success_threshold: u32,
    /// How long it must fail continuously before it counts (default 0).
    pub for_duration: Duration,
}

impl Default for Timing {
    /// A check that sets no timing field.
    fn default() -> Self {
        Timing {
            period: None,
            timeout: None,
            failure_threshold: 1,
            success_threshold: 1,
            for_duration: Duration::ZERO,
        }
    }
}

/// One check's state.
#[derive(Clone, Debug, PartialEq)]
pub struct Tracker {
    name: String,
    kind: CheckKind,
    phase: CheckPhase,
    timing: Timing,
    passing: bool,
    since: Option<Timestamp>,
    message: String,
    consecutive_failures: u32,
    consecutive_successes: u32,
    failing_since: Option<Timestamp>,
    success_rate_percent: Option<f64>,
}

impl Tracker {
    /// A check that has not run yet.
    pub fn new(name: &str, kind: CheckKind, phase: CheckPhase, timing: Timing) -> Self {
        Self {
            name: name.to_owned(),
            kind,
            phase,
            timing,
            passing: phase == CheckPhase::Liveness,
            since: None,
            message: "not run yet".into(),
            consecutive_failures: 0,
            consecutive_successes: 0,
            failing_since: None,
            success_rate_percent: None,
        }
    }

    /// `check`, not run yet.
    pub fn of(check: &Check) -> Self {
        Tracker::new(
            &check.name,
            check.kind.reported(),
            check.phase,
            check.timing,
        )
    }

    /// A check that cannot run because it does not parse (sent by a hub newer than its
    /// reader, say): failing from `now` on, saying why.
    pub fn refused(spec: &ClusterCheck, phase: CheckPhase, problem: &str, now: Timestamp) -> Self {
        let kind = spec.kinds().first().copied().unwrap_or(CheckKind::Lua);
        let mut tracker = Tracker::new(&spec.name, kind, phase, Timing::default());
        let message = format!("not run: the check cannot be read ({problem}); fix the check");
        tracker.record(&RunOutcome::fail(message), now);
        tracker
    }

    /// Records one run at `now`.
    pub fn record(&mut self, outcome: &RunOutcome, now: Timestamp) {
        let first = self.since.is_none();
        self.message = outcome.message.clone();
        self.success_rate_percent = outcome.success_rate_percent;
        let verdict = if outcome.passing {
            self.consecutive_failures = 0;
            self.consecutive_successes = self.consecutive_successes.saturating_add(1);
            self.failing_since = None;
            self.passing || self.consecutive_successes >= self.timing.success_threshold
        } else {
            self.consecutive_successes = 0;
            self.consecutive_failures = self.consecutive_failures.saturating_add(1);
            let failing_since = *self.failing_since.get_or_insert(now);
            let held_for = now.duration_since(failing_since).unsigned_abs();
            let counts = self.consecutive_failures >= self.timing.failure_threshold
                && held_for >= self.timing.for_duration;
            self.passing && !counts
        };
        if verdict != self.passing || first {
            self.since = Some(now);
        }
        self.passing = verdict;
    }

    /// Whether the check currently counts as passing.
    pub fn passing(&self) -> bool {
        self.passing
    }

    /// The result as reported to the hub.
    pub fn result(&self) -> CheckResult {
        CheckResult {
            name: self.name.clone(),
            kind: self.kind,
            phase: self.phase,
            passing: self.passing,
            message: self.message.clone(),
            since: self
                .since
                .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
            consecutive_failures: self.consecutive_failures,
            success_rate_percent: self.success_rate_percent,
        }
    }
}

#[cfg(test)]
mod tests;

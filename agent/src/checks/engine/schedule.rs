//! Each check's own schedule, and what reports show while a run is in progress (pure:
//! every call takes `now`). A check runs every period counted from the start of its
//! previous run, never twice at once; while a run is in progress the report carries the
//! previous result (or "not run yet"), marked late once the run outlasts the period.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use fleetpulse_common::api::{CheckKind, CheckPhase};
use fleetpulse_common::checks::model::Check;
use fleetpulse_common::protocol::limits::{MAX_MESSAGE_BYTES, truncate_message};
use fleetpulse_common::protocol::report::{AgentConfig, CheckResult};

use super::super::RunOutcome;
use super::super::builtin::APISERVER_CHECK;
use super::super::timing::{Timing, Tracker};

/// One configured check and where it stands.
pub(super) struct Scheduled {
    /// Shared with the run in progress: a run takes a handle, never a copy.
    pub(super) check: Arc<Check>,
    tracker: Tracker,
    period: Duration,
    next_run: Instant,
    /// When the run in progress started.
    running: Option<Instant>,
    /// A Lua check that runs in a round of its own: its last run needed longer than a
    /// shared round allows.
    alone: bool,
}

/// The API server's `/readyz`, checked every interval.
struct Readyz {
    tracker: Tracker,
    next_run: Instant,
    running: bool,
}

/// A run to start now.
#[derive(Clone)]
pub(super) struct Due {
    /// The check (a handle on the configured one).
    pub(super) check: Arc<Check>,
    /// When the run started (its next one is due a period later).
    pub(super) started: Instant,
    /// Whether a Lua check runs in a round of its own.
    pub(super) alone: bool,
}

/// Every check's schedule and verdict.
pub(super) struct State {
    pub(super) config: Arc<AgentConfig>,
    checks: Vec<Scheduled>,
    /// Checks of the config this agent cannot parse: each reports why, and never runs.
    refused: Vec<Tracker>,
    readyz: Option<Readyz>,
    default_period: Duration,
}

/// A check's period: its own, else the config's interval, else `default`.
fn period(check: Option<&Check>, config: &AgentConfig, default: Duration) -> Duration {
    check
        .and_then(|c| c.timing.period)
        .or((config.interval_seconds > 0)
            .then(|| Duration::from_secs(config.interval_seconds.into())))
        .unwrap_or(default)
}

impl State {
    /// No checks yet; `/readyz` too when the agent has a Kubernetes API.
    pub(super) fn new(has_api: bool, default_period: Duration, now: Instant) -> Self {
        let readyz = has_api.then(|| {
            let timing = Timing {
                failure_threshold: 3,
                ..Timing::default()
            };
            let (kind, phase) = (CheckKind::ApiServer, CheckPhase::Liveness);
            Readyz {
                tracker: Tracker::new(APISERVER_CHECK, kind, phase, timing),
                next_run: now,
                running: false,
            }
        });
        State {
            config: Arc::default(),
            checks: Vec::new(),
            refused: Vec::new(),
            readyz,
            default_period,
        }
    }

    /// Replaces the checks with `config`'s, parsed once here (at wall-clock `wall`). A
    /// check whose spec did not change keeps its verdict and its run in progress; the
    /// others start afresh, due now.
    pub(super) fn apply(&mut self, config: &AgentConfig, now: Instant, wall: Timestamp) {
        let mut old: BTreeMap<(bool, String), Scheduled> = std::mem::take(&mut self.checks)
            .into_iter()
            .map(|s| {
                (
                    (s.check.phase == CheckPhase::Readiness, s.check.name.clone()),
                    s,
                )
            })
            .collect();
        self.refused.clear();
        let lists = [
            (
                CheckPhase::Readiness,
                "readinessChecks",
                &config.readiness_checks,
            ),
            (
                CheckPhase::Liveness,
                "livenessChecks",
                &config.liveness_checks,
            ),
        ];
        for (phase, list, specs) in lists {
            for (i, spec) in specs.iter().enumerate() {
                let check = match Check::parse(spec, phase, &format!("{list}[{i}]")) {
                    Ok(check) => check,
                    Err(e) => {
                        let problem = e.to_string();
                        self.refused
                            .push(Tracker::refused(spec, phase, &problem, wall));
                        continue;
                    }
                };
                let key = (phase == CheckPhase::Readiness, check.name.clone());
                let mut scheduled = match old.remove(&key) {
                    Some(s) if *s.check == check => s,
                    _ => Scheduled {
                        tracker: Tracker::of(&check),
                        check: Arc::new(check),
                        period: Duration::ZERO,
                        next_run: now,
                        running: None,
                        alone: false,
                    },
                };
                scheduled.period = period(Some(&scheduled.check), config, self.default_period);
                self.checks.push(scheduled);
            }
        }
        self.config = Arc::new(config.clone());
    }

    /// The checks configured now.
    pub(super) fn checks(&self) -> impl Iterator<Item = &Arc<Check>> {
        self.checks.iter().map(|s| &s.check)
    }

    fn interval(&self) -> Duration {
        period(None, &self.config, self.default_period)
    }

    /// Marks every check due at `now` and not running as running, and returns them; and
    /// whether `/readyz` is due.
    pub(super) fn take_due(&mut self, now: Instant) -> (Vec<Due>, bool) {
        let due = self
            .checks
            .iter_mut()
            .filter(|s| s.running.is_none() && s.next_run <= now)
            .map(|s| {
                s.running = Some(now);
                Due {
                    check: Arc::clone(&s.check),
                    started: now,
                    alone: s.alone,
                }
            })
            .collect();
        let readyz = match &mut self.readyz {
            Some(r) if !r.running && r.next_run <= now => {
                r.running = true;
                true
            }
            _ => false,
        };
        (due, readyz)
    }

    /// Records the run of `due` that ended with `outcome` (at wall-clock `wall`); `alone`
    /// says whether its next run is in a round of its own. A run of a check the config
    /// has since replaced is dropped.
    pub(super) fn finish(&mut self, due: &Due, outcome: &RunOutcome, wall: Timestamp, alone: bool) {
        let Some(s) = self
            .checks
            .iter_mut()
            .find(|s| Arc::ptr_eq(&s.check, &due.check))
        else {
            return;
        };
        s.tracker.record(outcome, wall);
        s.running = None;
        s.alone = alone;
        s.next_run = due.started + s.period;
    }

    /// Records a `/readyz` run that started at `started`.
    pub(super) fn finish_readyz(
        &mut self,
        started: Instant,
        outcome: &RunOutcome,
        wall: Timestamp,
    ) {
        let interval = self.interval();
        if let Some(r) = &mut self.readyz {
            r.tracker.record(outcome, wall);
            r.running = false;
            r.next_run = started + interval;
        }
    }

    /// When the next check that is not running falls due.
    pub(super) fn next_wake(&self) -> Option<Instant> {
        self.checks
            .iter()
            .filter(|s| s.running.is_none())
            .map(|s| s.next_run)
            .chain(
                self.readyz
                    .iter()
                    .filter(|r| !r.running)
                    .map(|r| r.next_run),
            )
            .min()
    }

    /// Every check's current result; a check whose run in progress has outlasted its
    /// period says so after its previous result.
    pub(super) fn results(&self, now: Instant) -> Vec<CheckResult> {
        let readyz = self.readyz.iter().map(|r| r.tracker.result());
        let refused = self.refused.iter().map(Tracker::result);
        let checks = self.checks.iter().map(|s| {
            let mut result = s.tracker.result();
            if s.running.is_some_and(|started| now >= started + s.period) {
                result.message = late(&result.message, s.period);
            }
            result
        });
        readyz.chain(checks).chain(refused).collect()
    }
}

/// The message of a check whose run in progress outlasted its `period`: its previous
/// message and a note that does not change while the run goes on (a report's message
/// changes only when there is news).
pub(super) fn late(message: &str, period: Duration) -> String {
    let note = format!(
        " (late: the run in progress has taken longer than the check's {} s period; \
         this is the previous result)",
        period.as_secs()
    );
    let mut late = message.to_string();
    truncate_message(&mut late, MAX_MESSAGE_BYTES.saturating_sub(note.len()));
    late + &note
}

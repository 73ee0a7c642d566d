//! Which retry schedule the simulated agents follow: the agent's own
//! [`RetrySchedule`] (optionally with another timeout or cap, to compare), or the
//! schedule the agent had before it was chosen from these figures; with the agent's
//! [`Attempts`] deciding when a heartbeat's next request goes out and whether it is a
//! hedge.

use std::time::Duration;

use fleetpulse_agent::hub_client::RetrySchedule;
use fleetpulse_agent::hub_client::attempts::{self, Attempts};

/// A retry schedule for the simulated agents.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Schedule {
    /// The agent's [`RetrySchedule`], with its timeout and cap as shares of the interval
    /// when given.
    Agent {
        /// Request timeout as a share of the interval (`None`: the agent's).
        timeout_share: Option<f64>,
        /// Backoff cap as a share of the interval (`None`: the agent's).
        cap_share: Option<f64>,
    },
    /// The earlier schedule: timeout = the interval (1 to 10 s); exponential backoff from
    /// 500 ms to half the interval (at most 15 s), plus up to 100 % random on top.
    Legacy,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule::Agent {
            timeout_share: None,
            cap_share: None,
        }
    }
}

/// When the next heartbeat is sent after an accepted one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pacing {
    /// One interval after the accepted attempt was sent (the agent's).
    #[default]
    FromSend,
    /// One interval after its answer arrived (what the agent did before), so every
    /// network delay lengthens the next silence.
    FromAnswer,
}

impl Pacing {
    /// When to send the next heartbeat, the accepted one sent at `sent` and answered at
    /// `answered`, seconds.
    pub(super) fn next(self, sent: f64, answered: f64, interval: f64) -> f64 {
        match self {
            Pacing::FromSend => (sent + interval).max(answered),
            Pacing::FromAnswer => answered + interval,
        }
    }
}

/// A schedule fixed to one interval, as the simulated loop uses it.
#[derive(Clone, Copy, Debug)]
pub(super) enum Bound {
    Agent(RetrySchedule),
    Legacy { interval: f64 },
}

impl Schedule {
    pub(super) fn at(self, interval: f64) -> Bound {
        let i = Duration::from_secs_f64(interval);
        match self {
            Schedule::Agent {
                timeout_share,
                cap_share,
            } => {
                let agent = RetrySchedule::new(i);
                let timeout = timeout_share.map_or(agent.request_timeout(), |s| i.mul_f64(s));
                let cap = cap_share.map_or(agent.cap(), |s| i.mul_f64(s));
                Bound::Agent(RetrySchedule::with_limits(i, timeout, cap))
            }
            Schedule::Legacy => Bound::Legacy { interval },
        }
    }

    /// How it is described on the command line's stderr.
    pub fn describe(self, interval: f64) -> String {
        match self.at(interval) {
            Bound::Agent(s) => format!(
                "agent schedule: timeout {:?}, first retry {:?}..{:?}, cap {:?}",
                s.request_timeout(),
                s.delay(1, 0.0),
                s.delay(1, 1.0),
                s.cap()
            ),
            Bound::Legacy { .. } => "legacy schedule: timeout = interval, backoff 500 ms doubling to interval/2, +0-100 % jitter".to_owned(),
        }
    }
}

impl Bound {
    /// The request timeout, seconds.
    pub(super) fn timeout(&self) -> f64 {
        match self {
            Bound::Agent(s) => s.request_timeout().as_secs_f64(),
            Bound::Legacy { interval } => interval.clamp(1.0, 10.0),
        }
    }

    /// The delay before retry `attempt` (from 1), with `unit` uniform in `[0, 1)`.
    pub(super) fn delay(&self, attempt: u32, unit: f64) -> f64 {
        match self {
            Bound::Agent(s) => s.delay(attempt, unit).as_secs_f64(),
            Bound::Legacy { interval } => {
                let base_max = interval.min(30.0) / 2.0;
                let base = (0.5f64.min(base_max)
                    * 2f64.powi(attempt.saturating_sub(1).min(30) as i32))
                .min(base_max);
                base * (1.0 + unit)
            }
        }
    }
}

/// One heartbeat's requests under a [`Bound`] schedule: the agent's [`Attempts`], or the
/// legacy schedule (one request at a time, no hedges). Times are seconds.
#[derive(Clone, Debug)]
pub(super) enum Plan {
    Agent(Attempts),
    Legacy {
        interval: f64,
        failures: u32,
        retry_at: f64,
        in_flight: u32,
    },
}

/// What the next request carries and when it goes out, seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Next {
    pub at: f64,
    pub hedge: bool,
}

fn secs(t: f64) -> Duration {
    Duration::from_secs_f64(t.max(0.0))
}

impl Plan {
    /// A heartbeat's plan: with hedges when `hedge` (the agent's schedule only).
    pub(super) fn new(bound: Bound, hedge: bool) -> Self {
        match bound {
            Bound::Agent(s) if hedge => Plan::Agent(Attempts::new(s)),
            Bound::Agent(s) => Plan::Agent(Attempts::with_limit(s, 1)),
            Bound::Legacy { interval } => Plan::Legacy {
                interval,
                failures: 0,
                retry_at: 0.0,
                in_flight: 0,
            },
        }
    }

    pub(super) fn started(&mut self, at: f64) {
        match self {
            Plan::Agent(a) => a.started(secs(at)),
            Plan::Legacy { in_flight, .. } => *in_flight += 1,
        }
    }

    pub(super) fn failed(&mut self, at: f64, unit: f64) {
        match self {
            Plan::Agent(a) => a.failed(secs(at), unit),
            Plan::Legacy {
                interval,
                failures,
                retry_at,
                in_flight,
            } => {
                *in_flight -= 1;
                *failures += 1;
                *retry_at = at
                    + Bound::Legacy {
                        interval: *interval,
                    }
                    .delay(*failures, unit);
            }
        }
    }

    pub(super) fn next(&self) -> Option<Next> {
        match self {
            Plan::Agent(a) => a.next().map(|n| Next {
                at: n.at.as_secs_f64(),
                hedge: n.send == attempts::Send::Hedge,
            }),
            Plan::Legacy {
                retry_at,
                in_flight,
                ..
            } => (*in_flight == 0).then_some(Next {
                at: *retry_at,
                hedge: false,
            }),
        }
    }
}

//! One cluster's life on a virtual clock: the agent's loop with the agent's own
//! retry schedule ([`Schedule`]), retries and hedges ([`Plan`]) and pacing ([`Pacing`]),
//! the network and host impairments of a [`Profile`], and the hub's
//! [`Liveness`] judged at the hub's tick. Events run in time order; nothing sleeps.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use fleetpulse_hub::core::detector::{Detector, Liveness, Reachability};
use rand::Rng;
use rand::rngs::SmallRng;

use super::profile::Profile;
use super::schedule::{Pacing, Plan, Schedule};

/// One-way network delay without impairment, seconds.
const BASE_DELAY: f64 = 0.005;
/// Shortest quiet time between two windows of the same impairment, seconds.
const MIN_APART: f64 = 60.0;

/// The fixed settings of a run.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Heartbeat interval, seconds.
    pub interval: f64,
    /// The hub's detector tick, seconds.
    pub tick: f64,
    /// The agents' retry schedule.
    pub schedule: Schedule,
    /// When the agents send after an accepted heartbeat.
    pub pacing: Pacing,
    /// Whether retries are hedged (the agent's [`Attempts`]).
    ///
    /// [`Attempts`]: fleetpulse_agent::hub_client::Attempts
    pub hedge: bool,
}

/// What one cluster's life produced.
#[derive(Clone, Copy, Debug, Default)]
pub struct Life {
    /// Times the hub called the living cluster unreachable.
    pub false_unreachable: u64,
    /// Seconds from the cluster's death to the verdict.
    pub detection: f64,
    /// When the cluster died while the hub was down: when the hub came back, seconds
    /// after the death (the hub can judge nothing before, and gives every cluster a full
    /// grace period from then).
    pub hub_down_at_death: Option<f64>,
    /// Heartbeats the hub accepted.
    pub accepted: u64,
    /// Requests that reached the hub and were refused as a copy of, or older than, a
    /// report it had accepted (a hedge's loser, or a retried report arriving late).
    pub refused_copies: u64,
    /// Requests the agent sent.
    pub attempts: u64,
}

/// A recurring impairment over one life: windows `[start, end)`, in order, apart.
struct Windows(Vec<(f64, f64)>);

impl Windows {
    fn new(spec: Option<(f64, f64)>, until: f64, rng: &mut SmallRng) -> Self {
        let mut windows = Vec::new();
        if let Some((len, per_hour)) = spec {
            // At least a minute apart, so that two outages never merge into a longer one.
            let mean_gap = (3600.0 / per_hour - len - MIN_APART).max(1.0);
            let mut start = exponential(rng, mean_gap);
            while start < until {
                windows.push((start, start + len));
                start += len + MIN_APART + exponential(rng, mean_gap);
            }
        }
        Self(windows)
    }

    /// The end of the window covering `t`, if one does.
    fn covering(&self, t: f64) -> Option<f64> {
        let i = self.0.partition_point(|w| w.1 <= t);
        self.0.get(i).filter(|w| w.0 <= t).map(|w| w.1)
    }
}

fn exponential(rng: &mut SmallRng, mean: f64) -> f64 {
    -mean * (1.0 - rng.r#gen::<f64>()).ln()
}

/// The hub's side: liveness on a virtual clock, judged at its ticks.
struct Hub<'a> {
    base: Instant,
    detector: &'a Detector,
    tick: f64,
    phase: f64,
    liveness: Liveness,
    false_unreachable: u64,
    accepted: u64,
    /// Arrivals refused as copies of, or older than, an accepted report.
    refused_copies: u64,
    /// The newest report accepted.
    last_report: u64,
    /// Requests on their way, by arrival time (a late one can be overtaken by the retry
    /// sent after the agent gave up on it).
    in_flight: BinaryHeap<Reverse<Ordered>>,
    restarts: Windows,
    next_restart: usize,
}

impl Hub<'_> {
    fn at(&self, t: f64) -> Instant {
        self.base + Duration::from_secs_f64(t)
    }

    fn secs(&self, i: Instant) -> f64 {
        (i - self.base).as_secs_f64()
    }

    /// The first tick at which the current liveness is unreachable, the verdict taken
    /// from the detector at that tick.
    fn verdict_tick(&self) -> f64 {
        let deadline = self.secs(self.liveness.deadline(self.detector));
        let mut tick = self.phase + ((deadline - self.phase) / self.tick).floor() * self.tick;
        while tick <= deadline
            || !matches!(
                self.liveness.judge(self.at(tick), self.detector),
                Reachability::Unreachable { .. }
            )
        {
            tick += self.tick;
        }
        tick
    }

    /// Delivers what arrives by `until`, with hub restarts in their place in time.
    fn deliver(&mut self, until: f64) {
        loop {
            let arrival = self.in_flight.peek().map(|r| r.0.0).filter(|r| *r <= until);
            let restart = self.restarts.0.get(self.next_restart).copied();
            match (arrival, restart) {
                (_, Some((down, up))) if down <= arrival.unwrap_or(until) && down <= until => {
                    self.next_restart += 1;
                    if self.verdict_tick() < down {
                        self.false_unreachable += 1;
                    }
                    self.liveness = Liveness::new(self.at(up));
                }
                (Some(r), _) => {
                    let Reverse(Ordered(_, report)) = self.in_flight.pop().expect("peeked");
                    if report <= self.last_report {
                        // A hedge's second copy, or a report overtaken by a later one:
                        // refused, it changes nothing.
                        self.refused_copies += 1;
                        continue;
                    }
                    self.last_report = report;
                    if self.verdict_tick() < r {
                        self.false_unreachable += 1;
                    }
                    self.liveness.heartbeat(self.at(r));
                    self.accepted += 1;
                }
                _ => break,
            }
        }
    }
}

/// A request on its way: when the agent learns its outcome, and which.
struct Flight {
    sent: f64,
    end: f64,
    ok: bool,
}

/// The agent's side: sends requests through the profile's impairments.
struct Agent<'a> {
    profile: &'a Profile,
    interval: f64,
    timeout: f64,
    bursts: Windows,
    attempts: u64,
}

impl Agent<'_> {
    /// Sends report number `report` at `t`: what arrives goes into the hub's queue.
    fn send(&mut self, t: f64, report: u64, hub: &mut Hub<'_>, rng: &mut SmallRng) -> Flight {
        let (profile, timeout) = (self.profile, self.timeout);
        self.attempts += 1;
        let arrival = t + BASE_DELAY + profile.jitter * 2.0 * self.interval * rng.r#gen::<f64>();
        let failed = |end| Flight {
            sent: t,
            end,
            ok: false,
        };
        if self.bursts.covering(t).is_some() {
            return failed(t + timeout);
        }
        if rng.r#gen::<f64>() < profile.loss {
            return failed(t + 2.0 * BASE_DELAY);
        }
        if hub.restarts.covering(arrival).is_some() || rng.r#gen::<f64>() < profile.late_loss {
            return failed(arrival + BASE_DELAY);
        }
        hub.in_flight.push(Reverse(Ordered(arrival, report)));
        let answered = arrival + BASE_DELAY;
        if answered - t > timeout {
            failed(t + timeout)
        } else {
            Flight {
                sent: t,
                end: answered,
                ok: true,
            }
        }
    }
}

/// Lives one cluster for `hours`, dies, and reports.
pub fn live(
    profile: &Profile,
    detector: &Detector,
    timing: Timing,
    hours: f64,
    rng: &mut SmallRng,
) -> Life {
    let interval = timing.interval;
    let schedule = timing.schedule.at(interval);
    let death = hours * 3600.0;
    let base = Instant::now();
    let mut agent = Agent {
        profile,
        interval,
        timeout: schedule.timeout(),
        bursts: Windows::new(profile.burst, death, rng),
        attempts: 0,
    };
    let stalls = Windows::new(profile.stalls, death, rng);
    let mut hub = Hub {
        base,
        detector,
        tick: timing.tick,
        phase: rng.r#gen::<f64>() * timing.tick,
        liveness: Liveness::new(base),
        false_unreachable: 0,
        accepted: 0,
        refused_copies: 0,
        last_report: 0,
        in_flight: BinaryHeap::new(),
        restarts: Windows::new(profile.hub_restart, death, rng),
        next_restart: 0,
    };
    let mut report = 0u64;
    let mut t = rng.r#gen::<f64>() * interval;
    // One heartbeat per turn: its requests (retries and hedges) until one is answered.
    while let Some((sent, answered)) = 'beat: {
        let mut plan = Plan::new(schedule, timing.hedge);
        let mut flying: Vec<Flight> = Vec::new();
        let mut hedge = false;
        loop {
            if let Some(end) = stalls.covering(t) {
                t = end;
            }
            if t >= death {
                break 'beat None;
            }
            hub.deliver(t);
            report += u64::from(!hedge);
            flying.push(agent.send(t, report, &mut hub, rng));
            plan.started(t);
            // Wait for whichever comes first: an outcome, or the next request's time.
            loop {
                let first =
                    (0..flying.len()).min_by(|a, b| flying[*a].end.total_cmp(&flying[*b].end));
                if let Some(n) = plan.next()
                    && first.is_none_or(|i| n.at < flying[i].end)
                {
                    (t, hedge) = (n.at.max(t), n.hedge);
                    break;
                }
                let f =
                    flying.swap_remove(first.expect("nothing in flight always plans a request"));
                if f.ok {
                    break 'beat Some((f.sent, f.end));
                }
                plan.failed(f.end, rng.r#gen());
            }
        }
    } {
        t = timing.pacing.next(sent, answered, interval);
    }
    // The cluster is cut off at its death: what it had in flight never arrives, and
    // restarts after it do not count.
    hub.in_flight.retain(|r| r.0.0 <= death);
    hub.deliver(death);
    hub.restarts.0.truncate(hub.next_restart);
    let hub_down_at_death = hub.restarts.covering(death).map(|up| up - death);
    hub.deliver(f64::INFINITY);
    Life {
        false_unreachable: hub.false_unreachable,
        detection: hub.verdict_tick() - death,
        hub_down_at_death,
        accepted: hub.accepted,
        refused_copies: hub.refused_copies,
        attempts: agent.attempts,
    }
}

/// An arrival: its time (never NaN) and report number, ordered by time.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ordered(f64, u64);

impl Eq for Ordered {}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}

//! One cluster's life on a virtual clock: the agent's loop with the agent's own
//! retry schedule ([`Schedule`]) and pacing ([`Pacing`]), the network and host impairments of a [`Profile`], and the hub's
//! [`Liveness`] judged at the hub's tick. Events run in time order; nothing sleeps.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use fleetpulse_hub::core::detector::{Detector, Liveness, Reachability};
use rand::Rng;
use rand::rngs::SmallRng;

use super::profile::Profile;
use super::schedule::{Pacing, Schedule};

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
                    self.in_flight.pop();
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
    let timeout = schedule.timeout();
    let death = hours * 3600.0;
    let base = Instant::now();
    let bursts = Windows::new(profile.burst, death, rng);
    let stalls = Windows::new(profile.stalls, death, rng);
    let mut hub = Hub {
        base,
        detector,
        tick: timing.tick,
        phase: rng.r#gen::<f64>() * timing.tick,
        liveness: Liveness::new(base),
        false_unreachable: 0,
        accepted: 0,
        in_flight: BinaryHeap::new(),
        restarts: Windows::new(profile.hub_restart, death, rng),
        next_restart: 0,
    };
    let mut attempts = 0u64;
    let mut failures = 0u32;
    let mut t = rng.r#gen::<f64>() * interval;
    while t < death {
        if let Some(end) = stalls.covering(t) {
            t = end;
            continue;
        }
        hub.deliver(t);
        attempts += 1;
        let sent = t;
        let arrival = t + BASE_DELAY + profile.jitter * 2.0 * interval * rng.r#gen::<f64>();
        let outcome = if bursts.covering(t).is_some() {
            Err(t + timeout)
        } else if rng.r#gen::<f64>() < profile.loss {
            Err(t + 2.0 * BASE_DELAY)
        } else if hub.restarts.covering(arrival).is_some() || rng.r#gen::<f64>() < profile.late_loss
        {
            Err(arrival + BASE_DELAY)
        } else {
            hub.in_flight.push(Reverse(Ordered(arrival)));
            let answered = arrival + BASE_DELAY;
            if answered - t > timeout {
                Err(t + timeout)
            } else {
                Ok(answered)
            }
        };
        match outcome {
            Ok(answered) => {
                failures = 0;
                t = timing.pacing.next(sent, answered, interval);
            }
            Err(failed) => {
                failures += 1;
                t = failed + schedule.delay(failures, rng.r#gen());
            }
        }
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
        attempts,
    }
}

/// An `f64` arrival time with a total order (never NaN here).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ordered(f64);

impl Eq for Ordered {}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

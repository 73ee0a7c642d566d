//! The retry schedule on a failed heartbeat, as pure functions of the interval, the
//! attempt number and a uniform random draw: the agent's loop and the detection simulator
//! (`detection-sim` in the tests crate) run this same code.
//!
//! Chosen from the simulator's figures (docs/detection.md):
//! - a quick first retry (100 to 200 ms), so one failed request (a reset, a 503 from a
//!   proxy) costs the hub a fifth of a second of silence, not a backoff step;
//! - then doubling, with equal jitter (half fixed, half random) so a fleet that lost the
//!   hub at the same moment does not come back in step, capped at an eighth of the
//!   interval (at most 30 s), so after an outage ends the next attempt is at most that far;
//! - a request timeout of 70 % of the interval (1 s to 10 s): longer than the delays of a
//!   network that moves arrivals by ±30 % of the interval (so such a network causes no
//!   retries), short enough that after a blackhole of two intervals an accepted heartbeat
//!   still arrives within the default grace of four intervals (interval + outage +
//!   timeout + cap = 10 + 20 + 7 + 1.25 s < 40 s).

use std::time::Duration;

/// Longest delay between attempts, whatever the interval.
const MAX_CAP: Duration = Duration::from_secs(30);
/// The first retry's delay before jitter (at 10 s and longer intervals).
const FIRST: Duration = Duration::from_millis(200);

/// When to retry a failed heartbeat and how long to wait for an answer, for one interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetrySchedule {
    interval: Duration,
    timeout: Duration,
    cap: Duration,
}

impl RetrySchedule {
    /// The agent's schedule at `interval`.
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            timeout: interval
                .mul_f64(0.7)
                .clamp(Duration::from_secs(1), Duration::from_secs(10)),
            cap: (interval / 8).min(MAX_CAP),
        }
    }

    /// The same shape with another timeout and cap (for the simulator's comparisons).
    pub fn with_limits(interval: Duration, timeout: Duration, cap: Duration) -> Self {
        Self {
            interval,
            timeout,
            cap,
        }
    }

    /// How long one request may take: 70 % of the interval, between 1 s and 10 s.
    pub fn request_timeout(&self) -> Duration {
        self.timeout
    }

    /// The longest delay between attempts: an eighth of the interval, at most 30 s.
    pub fn cap(&self) -> Duration {
        self.cap
    }

    /// How long a retry may go unanswered before the same report is sent again beside it
    /// ([`Attempts`](super::attempts::Attempts)): a third of the request timeout, so past
    /// the round trip of any network that answers within the timeout at all (whole
    /// milliseconds, the timer's resolution).
    pub fn hedge_after(&self) -> Duration {
        let third = self.timeout / 3;
        third - Duration::from_nanos(u64::from(third.subsec_nanos() % 1_000_000))
    }

    /// The delay before retry number `attempt` (1 for the first retry after a failure),
    /// with `unit` a uniform draw from `[0, 1)`: half of the step fixed, half random.
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let first = FIRST.min(self.interval / 10);
        let step = first
            .saturating_mul(1 << attempt.saturating_sub(1).min(20))
            .min(self.cap());
        step / 2 + step.mul_f64(unit.clamp(0.0, 1.0) / 2.0)
    }

    /// The delays of one run of failures, drawing jitter from the thread's random source.
    pub fn delays(self) -> RetryDelays {
        RetryDelays {
            schedule: self,
            attempt: 0,
        }
    }
}

/// An endless sequence of [`RetrySchedule::delay`]s with random jitter.
#[derive(Clone, Debug)]
pub struct RetryDelays {
    schedule: RetrySchedule,
    attempt: u32,
}

impl Iterator for RetryDelays {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.attempt = self.attempt.saturating_add(1);
        Some(self.schedule.delay(self.attempt, rand::random::<f64>()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn the_first_retry_is_quick_then_delays_double_up_to_an_eighth_of_the_interval() {
        let s = RetrySchedule::new(Duration::from_secs(10));
        let low: Vec<_> = (1..=6).map(|a| s.delay(a, 0.0)).collect();
        let high: Vec<_> = (1..=6).map(|a| s.delay(a, 1.0)).collect();
        assert_eq!(low, [ms(100), ms(200), ms(400), ms(625), ms(625), ms(625)]);
        assert_eq!(
            high,
            [ms(200), ms(400), ms(800), ms(1250), ms(1250), ms(1250)]
        );
        assert_eq!(s.request_timeout(), Duration::from_secs(7));
        assert_eq!(s.hedge_after(), ms(2_333));
    }

    #[test]
    fn delays_stay_under_the_cap_and_timeouts_within_bounds_at_any_interval() {
        for (interval, cap, timeout) in [(1, 125, 1_000), (10, 1_250, 7_000), (600, 30_000, 10_000)]
        {
            let s = RetrySchedule::new(Duration::from_secs(interval));
            assert_eq!(s.cap(), ms(cap));
            assert_eq!(s.request_timeout(), ms(timeout));
            let delays: Vec<_> = s.delays().take(100).collect();
            assert_eq!(delays.len(), 100, "unlimited attempts");
            assert!(
                delays.iter().all(|d| *d <= s.cap()),
                "{interval}: {delays:?}"
            );
            assert!(
                delays.iter().all(|d| !d.is_zero()),
                "{interval}: {delays:?}"
            );
        }
    }

    #[test]
    fn a_huge_attempt_number_neither_overflows_nor_exceeds_the_cap() {
        let s = RetrySchedule::new(Duration::from_secs(3600));
        assert_eq!(s.delay(u32::MAX, 1.0), MAX_CAP);
    }
}

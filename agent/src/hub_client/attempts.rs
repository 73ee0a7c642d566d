//! When one heartbeat's requests go out, as a pure state machine over time offsets: the
//! agent's loop and the detection simulator (`detection-sim` in the tests crate) drive
//! this same code.
//!
//! - The first request of a heartbeat goes alone: a healthy network never sees two.
//! - After a failure, the next request waits the [`RetrySchedule`]'s delay, as before.
//! - A retry that stays unanswered for [`RetrySchedule::hedge_after`] is *hedged*: the
//!   same signed report goes out again beside it, at most [`MAX_IN_FLIGHT`] at once, and
//!   the first answer wins. So a run of slow failures (a load balancer that answers 503
//!   after the request's whole trip) no longer costs the hub one full trip per failure;
//!   chosen from the simulator's figures (docs/detection.md).
//!
//! A hedge repeats the report, so whichever copy reaches the hub second is refused as
//! `replayed` and changes nothing there; the agent has stopped waiting for it by then.

use std::time::Duration;

use super::RetrySchedule;

/// Most requests of one heartbeat in flight at once.
pub const MAX_IN_FLIGHT: u32 = 2;

/// What to send next, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Next {
    /// When, on the caller's clock (an offset from any fixed origin).
    pub at: Duration,
    /// What.
    pub send: Send,
}

/// Which report the next request carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Send {
    /// A new report (new sequence number, fresh check results): nothing is in flight.
    NewReport,
    /// The newest report in flight again, beside it.
    Hedge,
}

/// One heartbeat's requests: how many are in flight, how many failed, when the newest
/// went out.
#[derive(Clone, Debug)]
pub struct Attempts {
    schedule: RetrySchedule,
    failures: u32,
    retry_at: Duration,
    in_flight: u32,
    newest_start: Duration,
    limit: u32,
    /// A copy was refused because another copy was accepted: no more hedges.
    accepted_elsewhere: bool,
}

impl Attempts {
    /// A heartbeat nothing has been sent for yet.
    pub fn new(schedule: RetrySchedule) -> Self {
        Self {
            schedule,
            failures: 0,
            retry_at: Duration::ZERO,
            in_flight: 0,
            newest_start: Duration::ZERO,
            limit: MAX_IN_FLIGHT,
            accepted_elsewhere: false,
        }
    }

    /// The same with at most `limit` requests in flight (1: no hedges; for the
    /// simulator's comparisons).
    pub fn with_limit(schedule: RetrySchedule, limit: u32) -> Self {
        Self {
            limit: limit.max(1),
            ..Self::new(schedule)
        }
    }

    /// A request went out at `at`.
    pub fn started(&mut self, at: Duration) {
        self.in_flight += 1;
        self.newest_start = at;
    }

    /// A request failed at `at`; `unit`, uniform in `[0, 1)`, draws the backoff's jitter.
    pub fn failed(&mut self, at: Duration, unit: f64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.failures = self.failures.saturating_add(1);
        self.retry_at = at + self.schedule.delay(self.failures, unit);
    }

    /// As [`Self::failed`], where the hub asked for `wait` before the next attempt (its
    /// `Retry-After`): the next request, a retry or a hedge, goes no earlier than
    /// `at + wait`, or after the backoff's delay if that is longer.
    pub fn failed_asked_to_wait(&mut self, at: Duration, unit: f64, wait: Option<Duration>) {
        self.failed(at, unit);
        if let Some(wait) = wait {
            self.retry_at = self.retry_at.max(at + wait);
        }
    }

    /// A copy was refused because another copy of the same report was accepted: not a
    /// failure, and no more hedges, only a wait for the accepted copy's answer (if that is
    /// lost too, the next request is a new report at once).
    pub fn overtaken(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.accepted_elsewhere = true;
    }

    /// Failures so far in this heartbeat.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// The next request to send, or `None` while the heartbeat waits for an answer: the
    /// first request is in flight alone, [`MAX_IN_FLIGHT`] are (the limit), or a copy in
    /// flight is known to have been accepted.
    pub fn next(&self) -> Option<Next> {
        if self.in_flight == 0 {
            return Some(Next {
                at: self.retry_at,
                send: Send::NewReport,
            });
        }
        if self.failures == 0 || self.accepted_elsewhere || self.in_flight >= self.limit {
            return None;
        }
        Some(Next {
            at: self
                .retry_at
                .max(self.newest_start + self.schedule.hedge_after()),
            send: Send::Hedge,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn at_10s() -> Attempts {
        Attempts::new(RetrySchedule::new(Duration::from_secs(10)))
    }

    #[test]
    fn the_first_request_goes_alone_however_long_it_takes() {
        let mut a = at_10s();
        assert_eq!(
            a.next(),
            Some(Next {
                at: Duration::ZERO,
                send: Send::NewReport
            })
        );
        a.started(Duration::ZERO);
        assert_eq!(a.next(), None);
    }

    #[test]
    fn an_unanswered_retry_is_hedged_with_the_same_report_up_to_the_limit() {
        let mut a = at_10s();
        a.started(ms(0));
        a.failed(ms(6000), 0.0);
        // Nothing in flight: a new report after the first retry's delay (100 ms).
        assert_eq!(
            a.next(),
            Some(Next {
                at: ms(6100),
                send: Send::NewReport
            })
        );
        a.started(ms(6100));
        // Unanswered for a third of the 7 s timeout: the same report again.
        let hedge = a.next().unwrap();
        assert_eq!(hedge.send, Send::Hedge);
        assert_eq!(hedge.at, ms(6100) + ms(2_333));
        a.started(hedge.at);
        assert_eq!(a.in_flight(), MAX_IN_FLIGHT);
        assert_eq!(a.next(), None, "no third request while two are in flight");

        let mut alone = Attempts::with_limit(RetrySchedule::new(Duration::from_secs(10)), 1);
        alone.started(ms(0));
        alone.failed(ms(6000), 0.0);
        alone.started(ms(6100));
        assert_eq!(alone.next(), None, "a limit of one never hedges");
    }

    #[test]
    fn a_failure_beside_a_request_in_flight_still_waits_its_backoff() {
        let mut a = at_10s();
        a.started(ms(0));
        a.failed(ms(1000), 0.0);
        a.started(ms(1100));
        a.started(ms(3500));
        // The second copy fails fast; the first is still in flight.
        a.failed(ms(3600), 0.0);
        let next = a.next().unwrap();
        assert_eq!(next.send, Send::Hedge);
        // The second failure's delay (200 ms) ends before a third of the timeout after
        // the newest start: the hedge goes at the later of the two.
        assert_eq!(next.at, ms(3500) + ms(2_333));
        assert_eq!(a.failures(), 2);
    }

    #[test]
    fn an_overtaken_copy_stops_the_hedges_and_a_lost_winner_is_retried_at_once() {
        let mut a = at_10s();
        a.started(ms(0));
        a.failed(ms(2000), 0.0);
        a.started(ms(2100));
        a.started(ms(4500));
        a.overtaken();
        assert_eq!(a.failures(), 1);
        assert_eq!(
            a.next(),
            None,
            "the accepted copy's answer is awaited, not hedged"
        );
        // The accepted copy's answer is lost as well: a new report, no further wait.
        a.failed(ms(5000), 0.0);
        assert_eq!(a.in_flight(), 0);
        assert_eq!(
            a.next(),
            Some(Next {
                at: ms(5000) + ms(200),
                send: Send::NewReport
            })
        );
    }

    #[test]
    fn a_wait_the_hub_asks_for_replaces_a_shorter_backoff_and_holds_back_the_hedge() {
        let mut a = at_10s();
        a.started(ms(0));
        a.failed_asked_to_wait(ms(50), 0.0, Some(ms(2_000)));
        assert_eq!(
            a.next(),
            Some(Next {
                at: ms(2_050),
                send: Send::NewReport
            }),
            "two seconds after the answer, not the 100 ms backoff"
        );
        a.started(ms(2_050));
        a.started(ms(2_050) + ms(2_333));
        // The hedge fails with a longer wait while the retry is still in flight.
        a.failed_asked_to_wait(ms(4_500), 0.0, Some(ms(30_000)));
        assert_eq!(
            a.next(),
            Some(Next {
                at: ms(34_500),
                send: Send::Hedge
            })
        );

        // A wait shorter than the backoff changes nothing; no wait is the plain backoff.
        let mut short = at_10s();
        short.started(ms(0));
        short.failed_asked_to_wait(ms(0), 0.0, Some(ms(10)));
        let mut plain = at_10s();
        plain.started(ms(0));
        plain.failed_asked_to_wait(ms(0), 0.0, None);
        assert_eq!(short.next().unwrap().at, ms(100));
        assert_eq!(plain.next().unwrap().at, ms(100));
    }
}

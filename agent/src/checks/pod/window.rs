//! [`SuccessWindow`]: the verdict of a pod check from its recent runs (pure: every time is
//! an argument, so it runs on any clock, virtual or real).
//!
//! Rules:
//! - A run belongs to the window while it is younger than the window: a run recorded at
//!   `t` counts at `now` when `now - t < window` (at exactly `window` it has slid out).
//! - Failing when the success rate over the window is below the threshold (with at least
//!   one run in the window); a rate exactly at the threshold passes.
//! - Failing when the last `consecutive_failure_threshold` runs all failed, whether or not
//!   they are still in the window (a check that runs less often than its window is still
//!   judged by its recent runs).
//! - No run recorded yet: **not passing**, with the message `no run completed yet` (a
//!   readiness check must not pass before it has run once; the engine's thresholds decide
//!   what that means for liveness).
//! - Runs recorded, but none in the window (the runs stalled): the rate is unknown
//!   (`None`) and only the consecutive-failure rule applies.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The verdict of a [`SuccessWindow`] at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowVerdict {
    /// Whether the check passes.
    pub passing: bool,
    /// Success rate over the window, 0-100; `None` with no run in the window.
    pub success_rate_percent: Option<f64>,
    /// Failed runs since the last successful one.
    pub consecutive_failures: u32,
    /// Runs in the window.
    pub runs_in_window: u32,
    /// Why, in one sentence.
    pub message: String,
}

/// Success rate and consecutive failures over a sliding window of runs.
#[derive(Clone, Debug)]
pub struct SuccessWindow {
    window: Duration,
    threshold_percent: u32,
    consecutive_failure_threshold: u32,
    /// `(finished at, succeeded)`, oldest first.
    runs: VecDeque<(Instant, bool)>,
    consecutive_failures: u32,
    recorded_any: bool,
}

impl SuccessWindow {
    /// A window of `window`, failing below `threshold_percent` (capped at 100) or after
    /// `consecutive_failure_threshold` failed runs in a row (at least 1).
    pub fn new(
        window: Duration,
        threshold_percent: u32,
        consecutive_failure_threshold: u32,
    ) -> Self {
        Self {
            window,
            threshold_percent: threshold_percent.min(100),
            consecutive_failure_threshold: consecutive_failure_threshold.max(1),
            runs: VecDeque::new(),
            consecutive_failures: 0,
            recorded_any: false,
        }
    }

    /// Records a run that finished at `at`. Runs that have slid out of the window at `at`
    /// are forgotten.
    pub fn record(&mut self, at: Instant, success: bool) {
        self.recorded_any = true;
        self.consecutive_failures = if success {
            0
        } else {
            self.consecutive_failures.saturating_add(1)
        };
        self.runs.push_back((at, success));
        while let Some(&(first, _)) = self.runs.front() {
            if self.in_window(first, at) {
                break;
            }
            self.runs.pop_front();
        }
    }

    /// The verdict at `now`.
    pub fn evaluate(&self, now: Instant) -> WindowVerdict {
        let (runs, successes) = self
            .runs
            .iter()
            .filter(|(at, _)| self.in_window(*at, now))
            .fold((0u32, 0u32), |(runs, ok), (_, success)| {
                (runs + 1, ok + u32::from(*success))
            });
        let rate = (runs > 0).then(|| f64::from(successes) * 100.0 / f64::from(runs));
        let consecutive = self.consecutive_failures;
        let window = format_secs(self.window);
        let threshold = self.threshold_percent;
        let verdict = |passing, message| WindowVerdict {
            passing,
            success_rate_percent: rate,
            consecutive_failures: consecutive,
            runs_in_window: runs,
            message,
        };
        if !self.recorded_any {
            return verdict(false, "no run completed yet".to_owned());
        }
        if consecutive >= self.consecutive_failure_threshold {
            return verdict(
                false,
                format!(
                    "the last {consecutive} runs failed (consecutive failure threshold {})",
                    self.consecutive_failure_threshold
                ),
            );
        }
        let Some(rate) = rate else {
            return verdict(
                true,
                format!("no run finished in the last {window}; {consecutive} consecutive failures"),
            );
        };
        // Integer comparison: exactly at the threshold passes, with no rounding.
        let below = u64::from(successes) * 100 < u64::from(threshold) * u64::from(runs);
        let summary =
            format!("success rate {rate:.1}% ({successes} of {runs} runs in the last {window})");
        if below {
            verdict(
                false,
                format!("{summary} is below the threshold of {threshold}%"),
            )
        } else {
            verdict(true, format!("{summary}, threshold {threshold}%"))
        }
    }

    /// Whether a run finished at `at` is still in the window at `now`.
    fn in_window(&self, at: Instant, now: Instant) -> bool {
        now.saturating_duration_since(at) < self.window
    }
}

/// `600s`, or `1.5s` for sub-second windows.
fn format_secs(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    /// A 100 s window, 80% threshold, 3 consecutive failures; records `results` 10 s apart
    /// from `t0` and returns the window and the time of the last run.
    fn window_with(results: &[bool]) -> (SuccessWindow, Instant, Instant) {
        let t0 = Instant::now();
        let mut window = SuccessWindow::new(100 * S, 80, 3);
        let mut at = t0;
        for (i, success) in results.iter().enumerate() {
            at = t0 + 10 * S * i as u32;
            window.record(at, *success);
        }
        (window, t0, at)
    }

    #[test]
    fn no_run_yet_is_not_passing() {
        let (window, t0, _) = window_with(&[]);
        let verdict = window.evaluate(t0);
        assert!(!verdict.passing);
        assert_eq!(verdict.message, "no run completed yet");
        assert_eq!(verdict.success_rate_percent, None);
    }

    #[test]
    fn rate_below_threshold_fails() {
        // 7 of 10 = 70% < 80%, never 3 failures in a row.
        let runs = [
            true, false, true, false, true, true, false, true, true, true,
        ];
        let (window, _, last) = window_with(&runs);
        let verdict = window.evaluate(last);
        assert!(!verdict.passing, "{}", verdict.message);
        assert_eq!(verdict.success_rate_percent, Some(70.0));
        assert_eq!(verdict.runs_in_window, 10);
        assert_eq!(
            verdict.message,
            "success rate 70.0% (7 of 10 runs in the last 100s) is below the threshold of 80%"
        );
    }

    #[test]
    fn rate_exactly_at_threshold_passes() {
        // 8 of 10 = 80%.
        let runs = [true, false, true, true, false, true, true, true, true, true];
        let (window, _, last) = window_with(&runs);
        let verdict = window.evaluate(last);
        assert!(verdict.passing, "{}", verdict.message);
        assert_eq!(verdict.success_rate_percent, Some(80.0));
    }

    #[test]
    fn consecutive_failures_fail_even_with_a_good_rate() {
        let mut window = SuccessWindow::new(1000 * S, 50, 3);
        let t0 = Instant::now();
        for i in 0..20 {
            window.record(t0 + i * S, true);
        }
        window.record(t0 + 20 * S, false);
        window.record(t0 + 21 * S, false);
        assert!(
            window.evaluate(t0 + 21 * S).passing,
            "two failures are below the threshold"
        );
        window.record(t0 + 22 * S, false);
        let verdict = window.evaluate(t0 + 22 * S);
        assert!(!verdict.passing);
        assert_eq!(verdict.consecutive_failures, 3);
        assert!(
            verdict.message.starts_with("the last 3 runs failed"),
            "{}",
            verdict.message
        );
    }

    #[test]
    fn a_success_resets_consecutive_failures_and_the_check_recovers() {
        let (mut window, _, last) = window_with(&[true, false, false, false]);
        assert!(!window.evaluate(last).passing);
        // Recovery needs the rate back too: the failures slide out of the 100 s window.
        let later = last + 95 * S;
        window.record(later, true);
        let verdict = window.evaluate(later);
        assert_eq!(verdict.consecutive_failures, 0);
        assert_eq!(
            verdict.runs_in_window, 2,
            "the failure at 30 s and the new success"
        );
        assert!(!verdict.passing, "1 of 2 is below 80%: {}", verdict.message);
        let verdict = window.evaluate(last + 100 * S);
        assert_eq!(verdict.runs_in_window, 1);
        assert!(verdict.passing, "{}", verdict.message);
    }

    #[test]
    fn old_runs_slide_out_at_exactly_the_window_age() {
        let t0 = Instant::now();
        let mut window = SuccessWindow::new(100 * S, 80, 5);
        window.record(t0, false);
        window.record(t0 + 50 * S, true);
        let just_before = window.evaluate(t0 + 99 * S);
        assert_eq!(just_before.runs_in_window, 2);
        assert!(!just_before.passing, "50% < 80%");
        let at_window = window.evaluate(t0 + 100 * S);
        assert_eq!(at_window.runs_in_window, 1);
        assert_eq!(at_window.success_rate_percent, Some(100.0));
        assert!(at_window.passing);
    }

    #[test]
    fn runs_all_slid_out_leave_the_rate_unknown_and_the_check_passing() {
        let (window, _, last) = window_with(&[true, false]);
        let verdict = window.evaluate(last + 1000 * S);
        assert_eq!(verdict.success_rate_percent, None);
        assert_eq!(verdict.runs_in_window, 0);
        assert!(verdict.passing, "{}", verdict.message);
        assert!(
            verdict
                .message
                .starts_with("no run finished in the last 100s")
        );
    }

    #[test]
    fn recording_forgets_runs_that_slid_out() {
        let t0 = Instant::now();
        let mut window = SuccessWindow::new(10 * S, 80, 3);
        for i in 0..100 {
            window.record(t0 + i * S, true);
        }
        assert_eq!(window.runs.len(), 10);
    }

    #[test]
    fn zero_thresholds_are_clamped() {
        let t0 = Instant::now();
        let mut window = SuccessWindow::new(10 * S, 0, 0);
        window.record(t0, false);
        let verdict = window.evaluate(t0);
        assert!(
            !verdict.passing,
            "one failure reaches a threshold clamped to 1"
        );
        let mut window = SuccessWindow::new(10 * S, 0, 2);
        window.record(t0, false);
        assert!(
            window.evaluate(t0).passing,
            "0% is not below a 0% threshold"
        );
    }
}

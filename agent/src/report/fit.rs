//! Fitting check results into one report by construction, so the hub never refuses a
//! heartbeat for its size (a cluster whose every report is refused turns Unreachable, and
//! many at once would feed the partition brake).
//!
//! - More than [`MAX_CHECKS`] results: failing checks are kept first (a failing check left
//!   out would read as passing), then passing ones in their order; failing checks that
//!   still do not fit are summarised in one result per phase, which fails, names how many
//!   and which.
//! - Names are cut to [`MAX_CHECK_NAME_BYTES`], each message to [`MAX_MESSAGE_BYTES`].
//! - All messages together get [`MAX_REPORT_MESSAGE_BYTES`] (counted JSON-escaped),
//!   shared out failing checks first: every message gets the same cap, the largest that
//!   fits, and short messages leave their unused share to the long ones.

use fleetpulse_common::api::CheckPhase;
use fleetpulse_common::protocol::limits::{
    MAX_CHECK_NAME_BYTES, MAX_CHECKS, MAX_MESSAGE_BYTES, MAX_REPORT_MESSAGE_BYTES,
    json_escaped_len, truncate_escaped, truncate_message,
};
use fleetpulse_common::protocol::report::CheckResult;

/// Name of the result that stands for failing checks left out of a full report.
pub const MORE_CHECKS: &str = "fleetpulse-more-failing";

/// Makes `checks` legal for one report: at most [`MAX_CHECKS`], names and messages within
/// their limits, messages within the report's budget.
pub fn fit_checks(checks: &mut Vec<CheckResult>) {
    if checks.len() > MAX_CHECKS {
        summarise_beyond_limit(checks);
    }
    for check in checks.iter_mut() {
        truncate_escaped(&mut check.name, MAX_CHECK_NAME_BYTES);
        truncate_message(&mut check.message, MAX_MESSAGE_BYTES);
    }
    share_message_budget(checks, MAX_REPORT_MESSAGE_BYTES);
}

fn summarise_beyond_limit(checks: &mut Vec<CheckResult>) {
    let (failing, passing): (Vec<CheckResult>, Vec<CheckResult>) =
        std::mem::take(checks).into_iter().partition(|c| !c.passing);
    // Two places kept for the summaries (one per phase) when failing checks overflow.
    let room = if failing.len() > MAX_CHECKS {
        MAX_CHECKS - 2
    } else {
        MAX_CHECKS
    };
    let mut ordered = failing.into_iter().chain(passing);
    checks.extend(ordered.by_ref().take(room));
    let left_out: Vec<CheckResult> = ordered.filter(|c| !c.passing).collect();
    for phase in [CheckPhase::Readiness, CheckPhase::Liveness] {
        let names: Vec<&str> = left_out
            .iter()
            .filter(|c| c.phase == phase)
            .map(|c| c.name.as_str())
            .collect();
        let Some(first) = left_out.iter().find(|c| c.phase == phase) else {
            continue;
        };
        checks.push(CheckResult {
            name: MORE_CHECKS.to_owned(),
            kind: first.kind,
            phase,
            passing: false,
            message: format!(
                "{} more failing checks not listed (a report holds {MAX_CHECKS}): {}",
                names.len(),
                names.join(", ")
            ),
            since: first.since.clone(),
            consecutive_failures: first.consecutive_failures,
            success_rate_percent: None,
        });
    }
}

fn share_message_budget(checks: &mut [CheckResult], budget: usize) {
    let lens = |failing: bool, checks: &[CheckResult]| -> Vec<usize> {
        checks
            .iter()
            .filter(|c| c.passing != failing)
            .map(|c| json_escaped_len(&c.message))
            .collect()
    };
    let failing_lens = lens(true, checks);
    let failing_cap = equal_cap(&failing_lens, budget);
    let used: usize = failing_lens.iter().map(|l| (*l).min(failing_cap)).sum();
    let passing_cap = equal_cap(&lens(false, checks), budget - used);
    for check in checks.iter_mut() {
        let cap = if check.passing {
            passing_cap
        } else {
            failing_cap
        };
        truncate_escaped(&mut check.message, cap);
    }
}

/// The largest cap `c` with `sum(min(len, c)) <= budget` (`usize::MAX` when all fit).
fn equal_cap(lens: &[usize], budget: usize) -> usize {
    let mut sorted = lens.to_vec();
    sorted.sort_unstable();
    let mut remaining = budget;
    for (i, &len) in sorted.iter().enumerate() {
        let left = sorted.len() - i;
        if len.saturating_mul(left) <= remaining {
            remaining -= len;
        } else {
            return remaining / left;
        }
    }
    usize::MAX
}

#[cfg(test)]
mod tests;

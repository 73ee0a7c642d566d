//! A check's run in a batch ([`CheckRun`]) and why a check produced no verdict.

use std::time::Duration;

use super::RunOutcome;
use crate::lua::{LuaError, LuaOutcome};

/// One check's run in a batch.
#[derive(Clone, Debug)]
pub struct CheckRun {
    /// Its outcome.
    pub outcome: RunOutcome,
    /// How long it took (with the selectors' `evaluate` filters it ran first).
    pub took: Duration,
    /// Whether it failed by running past its deadline.
    pub deadline_exceeded: bool,
}

/// Why a check produced no verdict.
#[derive(Clone, Debug)]
pub(super) struct Failed {
    pub(super) message: String,
    deadline: bool,
}

impl Failed {
    pub(super) fn new(message: String) -> Self {
        Failed {
            message,
            deadline: false,
        }
    }
}

impl From<LuaError> for Failed {
    fn from(e: LuaError) -> Self {
        Failed {
            deadline: matches!(e, LuaError::Deadline { .. }),
            message: e.to_string(),
        }
    }
}

/// The run of check `index` that ended with `verdict` after `took`, handed to `each`.
pub(super) fn finished(
    index: usize,
    verdict: Result<LuaOutcome, Failed>,
    took: Duration,
    each: &mut impl FnMut(usize, &CheckRun),
) -> CheckRun {
    let run = match verdict {
        Ok(o) => CheckRun {
            outcome: RunOutcome {
                passing: o.passing,
                message: o.message,
                success_rate_percent: None,
            },
            took,
            deadline_exceeded: false,
        },
        Err(failed) => CheckRun {
            outcome: RunOutcome::fail(failed.message),
            took,
            deadline_exceeded: failed.deadline,
        },
    };
    each(index, &run);
    run
}

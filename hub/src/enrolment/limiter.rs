//! Limits on refused enrolment attempts, per source address and per token id: a fixed
//! window per key. Only refusals count, so an agent polling while its registration awaits
//! approval is never limited, and a burst of guessed tokens is cut off after a few tries.
//! Pure: time is an argument.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How many refusals a key may collect per window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// Refusals allowed per window.
    pub refusals: u32,
    /// The window.
    pub window: Duration,
}

/// Most keys tracked before old windows are dropped.
const MAX_KEYS: usize = 10_000;

/// Refusal counters by key.
#[derive(Debug)]
pub struct Limiter {
    limit: Limit,
    windows: HashMap<String, (Instant, u32)>,
}

impl Limiter {
    /// A limiter allowing `limit`.
    pub fn new(limit: Limit) -> Self {
        Self {
            limit,
            windows: HashMap::new(),
        }
    }

    /// Whether `key` is still allowed to try at `now`.
    pub fn allows(&self, key: &str, now: Instant) -> bool {
        match self.windows.get(key) {
            Some((start, count)) if now.duration_since(*start) < self.limit.window => {
                *count < self.limit.refusals
            }
            _ => true,
        }
    }

    /// Counts a refusal for `key` at `now`.
    pub fn refused(&mut self, key: &str, now: Instant) {
        if self.windows.len() >= MAX_KEYS {
            let window = self.limit.window;
            self.windows
                .retain(|_, (start, _)| now.duration_since(*start) < window);
        }
        let entry = self.windows.entry(key.to_owned()).or_insert((now, 0));
        if now.duration_since(entry.0) >= self.limit.window {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_beyond_the_limit_are_cut_off_until_the_window_passes() {
        let limit = Limit {
            refusals: 3,
            window: Duration::from_secs(60),
        };
        let mut limiter = Limiter::new(limit);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limiter.allows("10.0.0.1", t0));
            limiter.refused("10.0.0.1", t0);
        }
        assert!(!limiter.allows("10.0.0.1", t0 + Duration::from_secs(59)));
        assert!(
            limiter.allows("10.0.0.2", t0),
            "other sources are not limited"
        );
        assert!(limiter.allows("10.0.0.1", t0 + Duration::from_secs(60)));
    }
}

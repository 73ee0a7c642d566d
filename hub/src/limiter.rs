//! Fixed-window limits per key: how many counted events (refused enrolment attempts per
//! source and per token id; authentication failures per source) a key may collect in a
//! window before it is cut off until the window ends. Only what the caller counts counts,
//! so a key whose requests succeed is never limited. The map of tracked keys is bounded by
//! [`MAX_KEYS`], whatever the number of keys seen. Pure: time is an argument.
//!
//! - [`failures`]: the per-source limit on authentication failures that the agents'
//!   listener and the admin listener share.

pub mod failures;

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// How many counted events a key may collect per window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// Events allowed per window; the next try is refused until the window ends.
    pub allowed: u32,
    /// The window, from a key's first counted event.
    pub window: Duration,
}

/// Most keys tracked at once: when full, windows that ended are dropped, then the oldest.
pub const MAX_KEYS: usize = 10_000;

/// A key's current window.
#[derive(Clone, Copy, Debug)]
struct Window {
    start: Instant,
    count: u32,
}

/// Counted events by key.
#[derive(Debug)]
pub struct Limiter<K> {
    limit: Limit,
    windows: HashMap<K, Window>,
}

impl<K: Hash + Eq> Limiter<K> {
    /// A limiter allowing `limit`.
    pub fn new(limit: Limit) -> Self {
        Self {
            limit,
            windows: HashMap::new(),
        }
    }

    /// The limit it applies.
    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// Whether `key` is still allowed to try at `now`.
    pub fn allows<Q>(&self, key: &Q, now: Instant) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.blocked_for(key, now).is_none()
    }

    /// How long `key` is still cut off at `now` (until its window ends); `None` while it
    /// may try.
    pub fn blocked_for<Q>(&self, key: &Q, now: Instant) -> Option<Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let window = self.windows.get(key)?;
        let elapsed = now.saturating_duration_since(window.start);
        (elapsed < self.limit.window && window.count >= self.limit.allowed)
            .then(|| self.limit.window - elapsed)
    }

    /// Counts one event for `key` at `now`. True when this event used up the key's
    /// allowance, so it is cut off from now until its window ends: once per window.
    pub fn count<Q>(&mut self, key: &Q, now: Instant) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let limit = self.limit;
        let count = match self.windows.get_mut(key) {
            Some(w) if now.saturating_duration_since(w.start) < limit.window => {
                w.count = w.count.saturating_add(1);
                w.count
            }
            Some(w) => {
                *w = Window {
                    start: now,
                    count: 1,
                };
                1
            }
            None => {
                if self.windows.len() >= MAX_KEYS {
                    self.make_room(now);
                }
                let window = Window {
                    start: now,
                    count: 1,
                };
                self.windows.insert(key.to_owned(), window);
                1
            }
        };
        count == limit.allowed
    }

    /// Drops the windows that ended; if every one is still running, the oldest (the
    /// nearest to its end).
    fn make_room(&mut self, now: Instant) {
        let window = self.limit.window;
        self.windows
            .retain(|_, w| now.saturating_duration_since(w.start) < window);
        if self.windows.len() >= MAX_KEYS
            && let Some(oldest) = self.windows.values().map(|w| w.start).min()
        {
            self.windows.retain(|_, w| w.start > oldest);
        }
    }

    /// How many keys are tracked.
    pub fn tracked(&self) -> usize {
        self.windows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    fn limiter(allowed: u32) -> Limiter<String> {
        Limiter::new(Limit {
            allowed,
            window: MINUTE,
        })
    }

    #[test]
    fn refusals_beyond_the_limit_are_cut_off_until_the_window_passes() {
        let mut limiter = limiter(3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limiter.allows("10.0.0.1", t0));
            limiter.count("10.0.0.1", t0);
        }
        assert!(!limiter.allows("10.0.0.1", t0 + Duration::from_secs(59)));
        assert_eq!(
            limiter.blocked_for("10.0.0.1", t0 + Duration::from_secs(59)),
            Some(Duration::from_secs(1))
        );
        assert!(
            limiter.allows("10.0.0.2", t0),
            "other sources are not limited"
        );
        assert!(limiter.allows("10.0.0.1", t0 + MINUTE));
    }

    #[test]
    fn the_event_that_uses_up_the_allowance_is_reported_once_per_window() {
        let mut limiter = limiter(2);
        let t0 = Instant::now();
        let reported: Vec<bool> = (0..4).map(|_| limiter.count("k", t0)).collect();
        assert_eq!(reported, [false, true, false, false]);
        let next = t0 + MINUTE;
        assert!(!limiter.count("k", next), "a new window starts at one");
        assert!(limiter.count("k", next), "and is reported again");
    }

    #[test]
    fn the_tracked_keys_stay_bounded_and_the_newest_are_kept() {
        let mut limiter = limiter(1);
        let t0 = Instant::now();
        for i in 0..MAX_KEYS + 500 {
            let at = t0 + Duration::from_millis(i as u64);
            limiter.count(
                format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255).as_str(),
                at,
            );
            assert!(limiter.tracked() <= MAX_KEYS, "{} keys", limiter.tracked());
        }
        let last = MAX_KEYS + 499;
        let newest = format!("10.{}.{}.{}", last >> 16, (last >> 8) & 255, last & 255);
        let now = t0 + Duration::from_millis(last as u64);
        assert!(
            !limiter.allows(newest.as_str(), now),
            "the newest key is still cut off"
        );
        assert!(limiter.allows("10.0.0.0", now), "the oldest made room");
    }

    #[test]
    fn ended_windows_are_dropped_before_running_ones() {
        let mut limiter = limiter(1);
        let t0 = Instant::now();
        for i in 0..MAX_KEYS - 1 {
            limiter.count(format!("old-{i}").as_str(), t0);
        }
        let later = t0 + Duration::from_secs(30);
        limiter.count("running", later);
        let after = t0 + MINUTE;
        limiter.count("new", after);
        assert_eq!(
            limiter.tracked(),
            2,
            "only the running window and the new one"
        );
        assert!(!limiter.allows("running", after));
    }
}

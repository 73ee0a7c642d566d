//! A cluster's recent inter-arrival times (the gaps between accepted heartbeats, on the
//! hub's clock): a fixed window with running sums, so recording a heartbeat and reading
//! the mean and deviation are O(1) and need no allocation.

use std::time::Duration;

/// Gaps kept: about ten minutes at 10 s heartbeats.
pub const WINDOW: usize = 64;
/// Longest gap kept as such (a day, the longest grace period); longer ones count as this.
const MAX_GAP_MS: u64 = 86_400_000;

/// The last [`WINDOW`] inter-arrival times, in milliseconds.
#[derive(Clone, Debug)]
pub struct History {
    gaps: [u32; WINDOW],
    next: u8,
    len: u8,
    sum: u64,
    sum_sq: u64,
}

impl Default for History {
    fn default() -> Self {
        Self {
            gaps: [0; WINDOW],
            next: 0,
            len: 0,
            sum: 0,
            sum_sq: 0,
        }
    }
}

impl History {
    /// Adds one gap, dropping the oldest when the window is full.
    pub fn record(&mut self, gap: Duration) {
        let ms = (gap.as_millis() as u64).min(MAX_GAP_MS);
        let slot = usize::from(self.next);
        if usize::from(self.len) == WINDOW {
            let old = u64::from(self.gaps[slot]);
            self.sum -= old;
            self.sum_sq -= old * old;
        } else {
            self.len += 1;
        }
        self.gaps[slot] = ms as u32;
        self.sum += ms;
        self.sum_sq += ms * ms;
        self.next = ((slot + 1) % WINDOW) as u8;
    }

    /// How many gaps are kept.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether no gap was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Mean and standard deviation of the kept gaps, in seconds (`None` when empty).
    pub fn mean_and_deviation(&self) -> Option<(f64, f64)> {
        if self.len == 0 {
            return None;
        }
        let n = f64::from(self.len);
        let mean = self.sum as f64 / n;
        let variance = (self.sum_sq as f64 / n - mean * mean).max(0.0);
        Some((mean / 1000.0, variance.sqrt() / 1000.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_deviation_cover_only_the_last_window_of_gaps() {
        let mut h = History::default();
        assert_eq!(h.mean_and_deviation(), None);
        for _ in 0..WINDOW {
            h.record(Duration::from_secs(100));
        }
        for i in 0..WINDOW {
            h.record(Duration::from_millis(if i % 2 == 0 {
                9_000
            } else {
                11_000
            }));
        }
        assert_eq!(h.len(), WINDOW);
        let (mean, dev) = h.mean_and_deviation().unwrap();
        assert!((mean - 10.0).abs() < 1e-9, "{mean}");
        assert!((dev - 1.0).abs() < 1e-9, "{dev}");
    }

    #[test]
    fn a_gap_longer_than_a_day_counts_as_a_day() {
        let mut h = History::default();
        h.record(Duration::from_secs(10 * 86_400));
        assert_eq!(h.mean_and_deviation().unwrap().0, 86_400.0);
    }
}

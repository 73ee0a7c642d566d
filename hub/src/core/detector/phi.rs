//! Phi accrual (Hayashibara et al.), as Akka and Cassandra use it: the suspicion that a
//! silent cluster is gone grows with the silence, measured against a normal fit of the
//! cluster's own inter-arrival history; at `phi` the chance that a heartbeat still comes
//! is 10^-phi. Because phi only grows with the silence, the threshold is a deadline after
//! the last heartbeat, `mean + z * deviation`, computed once per heartbeat rather than a
//! logarithm per tick; it is then kept between a floor and the grace period.
//!
//! Until the history holds [`MIN_SAMPLES`] gaps (a new cluster, a restarted hub) the
//! detector allows the whole grace period.

use std::time::Duration;

use fleetpulse_common::api::HeartbeatSpec;

use super::history::History;

/// Default suspicion level.
pub const DEFAULT_THRESHOLD: u32 = 4;
/// Gaps needed before the history is trusted.
pub const MIN_SAMPLES: usize = 8;
/// The deviation never counts as less than this share of the interval (a perfectly
/// regular history would otherwise allow no slack at all).
const MIN_DEVIATION_SHARE: f64 = 0.1;

/// `z` with `P(X > mean + z * deviation) = 10^-phi` for a normal `X`, for phi 1 to 12.
const Z_FOR_PHI: [f64; 12] = [
    1.281_551_565_544_600_8,
    2.326_347_874_040_840_8,
    3.090_232_306_167_813,
    3.719_016_485_455_708_4,
    4.264_890_793_923_84,
    4.753_424_308_817_089,
    5.199_337_582_290_662,
    5.612_001_243_305_506,
    5.997_807_019_601_638,
    6.361_340_889_697_421,
    6.706_023_143_414_748,
    7.034_486_910_047_835_6,
];

/// Phi accrual settings for one cluster.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhiAccrual {
    /// The suspicion level at which the cluster is unreachable (1 to 12).
    pub threshold: u32,
    /// Never unreachable after less silence than this.
    pub floor: Duration,
    /// Never more silence allowed than this: the grace period.
    pub ceiling: Duration,
    /// The smallest deviation used, in seconds.
    pub min_deviation: f64,
}

impl PhiAccrual {
    /// The settings `spec` asks for, with the defaults: threshold 4, floor two intervals
    /// but never under half the grace period (nor above it).
    pub fn for_spec(spec: &HeartbeatSpec) -> Self {
        let interval = Duration::from_secs(spec.interval_seconds.into());
        let ceiling = Duration::from_secs(spec.grace_period_seconds.into());
        let floor = spec
            .detector
            .min_silence_seconds
            .map_or(interval * 2, |s| Duration::from_secs(s.into()))
            .max(ceiling / 2)
            .min(ceiling);
        Self {
            threshold: spec
                .detector
                .phi_threshold
                .unwrap_or(DEFAULT_THRESHOLD)
                .clamp(1, 12),
            floor,
            ceiling,
            min_deviation: interval.as_secs_f64() * MIN_DEVIATION_SHARE,
        }
    }

    /// The silence after which the cluster is unreachable, given its history.
    pub fn allowed_silence(&self, history: &History) -> Duration {
        if history.len() < MIN_SAMPLES {
            return self.ceiling;
        }
        let Some((mean, deviation)) = history.mean_and_deviation() else {
            return self.ceiling;
        };
        let z = Z_FOR_PHI[(self.threshold.clamp(1, 12) - 1) as usize];
        let secs = mean + z * deviation.max(self.min_deviation);
        Duration::from_secs_f64(secs.clamp(self.floor.as_secs_f64(), self.ceiling.as_secs_f64()))
    }

    /// The suspicion level after `silence`, given the history (for logs and tools);
    /// `None` until the history is trusted.
    pub fn phi(&self, history: &History, silence: Duration) -> Option<f64> {
        if history.len() < MIN_SAMPLES {
            return None;
        }
        let (mean, deviation) = history.mean_and_deviation()?;
        let z = (silence.as_secs_f64() - mean) / deviation.max(self.min_deviation);
        Some(-normal_tail(z).max(f64::MIN_POSITIVE).log10())
    }
}

/// `P(X > z)` for a standard normal `X` (Abramowitz and Stegun 7.1.26, error below
/// 1.5e-7, enough for a log).
fn normal_tail(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erfc = poly * (-x * x).exp();
    if z >= 0.0 {
        erfc / 2.0
    } else {
        1.0 - erfc / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_matches_the_table_of_z_values() {
        for (i, z) in Z_FOR_PHI.iter().enumerate().take(5) {
            let phi = -normal_tail(*z).log10();
            assert!(
                (phi - (i + 1) as f64).abs() < 0.01,
                "phi {} gave {phi}",
                i + 1
            );
        }
        assert!((normal_tail(0.0) - 0.5).abs() < 1e-6);
    }
}

//! The failure-detection simulator behind the `detection-sim` binary: many clusters over
//! virtual time, each with the hub's real [`Detector`] and [`Liveness`] and the agent's real
//! [`RetrySchedule`](fleetpulse_agent::hub_client::RetrySchedule), under named impairment
//! [`profile`]s. Every cluster lives its hours and then dies, so each run measures both
//! how often a living cluster is called unreachable and how fast a dead one is.

pub mod profile;
pub mod schedule;

mod cluster;

use std::fmt;

use fleetpulse_common::api::{DetectorKind, DetectorSpec, HeartbeatSpec};
use fleetpulse_hub::core::detector::Detector;
use rand::SeedableRng;
use rand::rngs::SmallRng;

pub use cluster::Timing;
pub use profile::Profile;
pub use schedule::{Pacing, Schedule};

/// A detector configuration by name: `fixed` or `phi` (with an optional threshold, `phi8`).
#[derive(Clone, Debug, PartialEq)]
pub struct DetectorChoice {
    /// The name as printed.
    pub name: String,
    /// The MemberCluster detector settings it stands for.
    pub spec: DetectorSpec,
}

/// A detector name that is neither `fixed` nor `phi[1-12]`.
#[derive(Debug, thiserror::Error)]
#[error("unknown detector `{0}`; use `fixed`, `phi` or `phi<threshold 1-12>` (e.g. phi8)")]
pub struct UnknownDetector(pub String);

impl DetectorChoice {
    /// Parses `fixed`, `phi` or `phiN`.
    pub fn parse(name: &str) -> Result<Self, UnknownDetector> {
        let spec = match name {
            "fixed" => DetectorSpec::default(),
            "phi" => DetectorSpec {
                kind: DetectorKind::PhiAccrual,
                ..DetectorSpec::default()
            },
            _ => {
                let threshold = name
                    .strip_prefix("phi")
                    .and_then(|t| t.parse::<u32>().ok())
                    .filter(|t| (1..=12).contains(t))
                    .ok_or_else(|| UnknownDetector(name.to_owned()))?;
                DetectorSpec {
                    kind: DetectorKind::PhiAccrual,
                    phi_threshold: Some(threshold),
                    ..DetectorSpec::default()
                }
            }
        };
        Ok(Self {
            name: name.to_owned(),
            spec,
        })
    }
}

/// The settings of one run.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    /// Clusters simulated (each one death).
    pub clusters: u32,
    /// Hours each cluster lives.
    pub hours: f64,
    /// Heartbeat interval, seconds.
    pub interval_seconds: u32,
    /// Grace period, seconds.
    pub grace_seconds: u32,
    /// The hub's detector tick, seconds.
    pub tick_seconds: f64,
    /// Random seed (the same seed gives the same figures).
    pub seed: u64,
    /// The agents' retry schedule.
    pub schedule: Schedule,
    /// When the agents send after an accepted heartbeat.
    pub pacing: Pacing,
    /// Whether the agents hedge unanswered retries (theirs do; `false` to compare).
    pub hedge: bool,
}

/// The figures of one profile × detector.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The profile.
    pub profile: String,
    /// The detector.
    pub detector: String,
    /// Clusters simulated.
    pub clusters: u32,
    /// Cluster-hours simulated.
    pub cluster_hours: f64,
    /// Verdicts of unreachable on living clusters.
    pub false_unreachable: u64,
    /// Seconds from each death to its verdict, sorted.
    pub detections: Vec<f64>,
    /// Deaths that fell while the hub was down.
    pub deaths_while_hub_down: u64,
    /// The longest time from a death, or from the hub's return for a death while it was
    /// down, to the verdict: what the detector itself takes once it can see.
    pub detect_max_after_hub_up: f64,
    /// Heartbeats accepted and requests sent.
    pub accepted: u64,
    /// Requests sent, retries included.
    pub attempts: u64,
    /// Requests refused at the hub as a copy of, or older than, an accepted report.
    pub refused_copies: u64,
}

impl Outcome {
    /// False verdicts per million cluster-hours.
    pub fn false_per_million(&self) -> f64 {
        self.false_unreachable as f64 * 1e6 / self.cluster_hours
    }

    /// The `q` quantile (0 to 1) of detection times, nearest rank.
    pub fn detection_quantile(&self, q: f64) -> f64 {
        if self.detections.is_empty() {
            return f64::NAN;
        }
        let rank = (q * self.detections.len() as f64).ceil() as usize;
        self.detections[rank.clamp(1, self.detections.len()) - 1]
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "profile={} detector={} clusters={} hours={} false_unreachable={} \
             false_per_million_cluster_hours={:.3} detect_p50_s={:.1} detect_p99_s={:.1} \
             detect_max_s={:.1} deaths_while_hub_down={} detect_max_after_hub_up_s={:.1} \
             requests_per_heartbeat={:.3} refused_per_cluster_hour={:.3}",
            self.profile,
            self.detector,
            self.clusters,
            self.cluster_hours.round(),
            self.false_unreachable,
            self.false_per_million(),
            self.detection_quantile(0.5),
            self.detection_quantile(0.99),
            self.detection_quantile(1.0),
            self.deaths_while_hub_down,
            self.detect_max_after_hub_up,
            self.attempts as f64 / self.accepted.max(1) as f64,
            self.refused_copies as f64 / self.cluster_hours,
        )
    }
}

/// Simulates `run.clusters` clusters under `profile` with `detector`.
pub fn simulate(profile: &Profile, detector: &DetectorChoice, run: Run) -> Outcome {
    let spec = HeartbeatSpec {
        interval_seconds: run.interval_seconds,
        grace_period_seconds: run.grace_seconds,
        detector: detector.spec.clone(),
    };
    let hub_detector = Detector::for_spec(&spec);
    let timing = Timing {
        interval: f64::from(run.interval_seconds),
        tick: run.tick_seconds,
        schedule: run.schedule,
        pacing: run.pacing,
        hedge: run.hedge,
    };
    let mut rng = SmallRng::seed_from_u64(run.seed);
    let mut out = Outcome {
        profile: profile.name.clone(),
        detector: detector.name.clone(),
        clusters: run.clusters,
        cluster_hours: f64::from(run.clusters) * run.hours,
        false_unreachable: 0,
        detections: Vec::with_capacity(run.clusters as usize),
        deaths_while_hub_down: 0,
        detect_max_after_hub_up: 0.0,
        accepted: 0,
        attempts: 0,
        refused_copies: 0,
    };
    for _ in 0..run.clusters {
        let life = cluster::live(profile, &hub_detector, timing, run.hours, &mut rng);
        out.false_unreachable += life.false_unreachable;
        out.detections.push(life.detection);
        let after_hub_up = life.detection - life.hub_down_at_death.unwrap_or(0.0);
        out.detect_max_after_hub_up = out.detect_max_after_hub_up.max(after_hub_up);
        out.deaths_while_hub_down += u64::from(life.hub_down_at_death.is_some());
        out.accepted += life.accepted;
        out.attempts += life.attempts;
        out.refused_copies += life.refused_copies;
    }
    out.detections.sort_by(f64::total_cmp);
    out
}

#[cfg(test)]
mod tests;

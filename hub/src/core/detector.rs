//! The failure detector: is a cluster's agent still reporting, judged on the hub's own
//! monotonic clock (receive time), never on the agent's clock.
//!
//! Pure: every method takes `now`. A cluster is judged only after it had a full grace
//! period to report since the later of its last heartbeat and its *grace start*: the hub's
//! start, the cluster's registration, or a reset (after a partition). That gives the
//! startup grace: a restarted hub never marks a cluster unreachable before the cluster
//! had a whole grace period to reach it.
//!
//! How much silence after the last heartbeat is allowed is the [`Detector`]'s call:
//! - [`Detector::Fixed`]: the grace period.
//! - [`Detector::PhiAccrual`] ([`phi`]): what the cluster's own recent inter-arrival times
//!   ([`history`]) make improbable, between a floor and the grace period.

pub mod history;
pub mod phi;
#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use fleetpulse_common::api::{DetectorKind, HeartbeatSpec};

use history::History;
pub use phi::PhiAccrual;

/// What the detector concludes about one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reachability {
    /// A heartbeat arrived within the allowed silence.
    Reachable,
    /// No heartbeat within the grace period since the grace start: not judged yet.
    Pending,
    /// No heartbeat for longer than the allowed silence.
    Unreachable {
        /// How long the cluster has been silent (since its last heartbeat, or since the
        /// grace start if it never reported to this hub process).
        silent_for: Duration,
        /// Whether any heartbeat was received by this hub process.
        ever_reported: bool,
    },
}

/// How long a cluster may stay silent after its last heartbeat.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Detector {
    /// Unreachable after the grace period.
    Fixed {
        /// The grace period.
        grace: Duration,
    },
    /// Phi accrual over the cluster's inter-arrival history, capped at the grace period.
    PhiAccrual(PhiAccrual),
}

impl Detector {
    /// A fixed grace period.
    pub fn fixed(grace: Duration) -> Self {
        Detector::Fixed { grace }
    }

    /// The detector a MemberCluster's `spec.heartbeat` asks for.
    pub fn for_spec(spec: &HeartbeatSpec) -> Self {
        let grace = Duration::from_secs(spec.grace_period_seconds.into());
        match spec.detector.kind {
            DetectorKind::Fixed => Detector::fixed(grace),
            DetectorKind::PhiAccrual => Detector::PhiAccrual(PhiAccrual::for_spec(spec)),
        }
    }

    /// The grace period: the longest silence any detector allows, and the startup grace.
    pub fn grace(&self) -> Duration {
        match self {
            Detector::Fixed { grace } => *grace,
            Detector::PhiAccrual(phi) => phi.ceiling,
        }
    }

    /// The silence after the last heartbeat that makes the cluster unreachable, given its
    /// inter-arrival history.
    pub fn allowed_silence(&self, history: &History) -> Duration {
        match self {
            Detector::Fixed { grace } => *grace,
            Detector::PhiAccrual(phi) => phi.allowed_silence(history),
        }
    }
}

/// Per-cluster liveness.
#[derive(Clone, Debug)]
pub struct Liveness {
    last_heartbeat: Option<Instant>,
    grace_start: Instant,
    history: History,
    /// The last heartbeat a previous hub process heard, as carried over to this one, and
    /// when this one took it over.
    carried: Option<(Instant, Instant)>,
}

impl Liveness {
    /// A cluster first seen at `now` (hub start or registration): its grace starts now.
    pub fn new(now: Instant) -> Self {
        Self {
            last_heartbeat: None,
            grace_start: now,
            history: History::default(),
            carried: None,
        }
    }

    /// Takes over, at `now`, that a previous hub process last heard from the cluster at
    /// `heard`. The detector does not judge by it (the startup grace still runs from this
    /// process's start: the hub cannot tell its own absence from the cluster's silence);
    /// the partition brake does ([`Liveness::brake_last_heartbeat`]).
    pub fn carry_over(&mut self, heard: Instant, now: Instant) {
        self.carried = Some((heard, now));
    }

    /// The last heartbeat the partition brake counts, for a cluster with this `grace`
    /// period: the last one this process received; before that, one carried over from a
    /// previous process, taken as heard when this process took it over if it was heard
    /// within two grace periods of then (the silence during the hub's own absence is the
    /// hub's, not the cluster's), else as it was (a cluster long silent does not count as
    /// reporting). So a partition of the hub right after it starts finds every cluster
    /// that was reporting and holds the sets, instead of finding none.
    pub fn brake_last_heartbeat(&self, grace: Duration) -> Option<Instant> {
        self.last_heartbeat.or_else(|| {
            let (heard, taken) = self.carried?;
            Some(if taken.saturating_duration_since(heard) <= grace * 2 {
                taken
            } else {
                heard
            })
        })
    }

    /// Records an accepted heartbeat received at `now` (and the time since the previous
    /// one in the history).
    pub fn heartbeat(&mut self, now: Instant) {
        match self.last_heartbeat {
            Some(last) if now > last => {
                self.history.record(now - last);
                self.last_heartbeat = Some(now);
            }
            Some(_) => {}
            None => self.last_heartbeat = Some(now),
        }
    }

    /// Gives the cluster a fresh grace period from `now` (e.g. after the hub was cut off).
    pub fn reset_grace(&mut self, now: Instant) {
        self.grace_start = self.grace_start.max(now);
    }

    /// When the last heartbeat was received.
    pub fn last_heartbeat(&self) -> Option<Instant> {
        self.last_heartbeat
    }

    /// The inter-arrival history.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The last instant at which the cluster is not yet unreachable if nothing arrives:
    /// [`Liveness::judge`] says `Unreachable` exactly at every instant after it.
    pub fn deadline(&self, detector: &Detector) -> Instant {
        let startup = self.grace_start + detector.grace();
        match self.last_heartbeat {
            Some(last) => (last + detector.allowed_silence(&self.history)).max(startup),
            None => startup,
        }
    }

    /// Judges the cluster at `now` with its detector.
    pub fn judge(&self, now: Instant, detector: &Detector) -> Reachability {
        if let Some(last) = self.last_heartbeat
            && now.saturating_duration_since(last) <= detector.allowed_silence(&self.history)
        {
            return Reachability::Reachable;
        }
        if now.saturating_duration_since(self.grace_start) <= detector.grace() {
            return Reachability::Pending;
        }
        let silent_since = self.last_heartbeat.unwrap_or(self.grace_start);
        Reachability::Unreachable {
            silent_for: now.saturating_duration_since(silent_since),
            ever_reported: self.last_heartbeat.is_some(),
        }
    }
}

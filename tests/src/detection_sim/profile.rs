//! Impairment profiles: what the network, the agent's host and the hub do to heartbeats.
//! Named profiles combine with `+` (`jitter30+loss5`); each part sets its own fields.

use std::fmt;

/// One impairment profile. Rates are per cluster-hour; lengths and delays in seconds,
/// shares of the interval where the name says so.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    /// The name as given (`jitter30+loss5`).
    pub name: String,
    /// One-way delay of every request to the hub, uniform over `0..=2 * jitter` of the
    /// interval: arrivals move by `±jitter` around their mean.
    pub jitter: f64,
    /// Share of requests that fail at once (a reset on the first hop, as the fault proxy
    /// does): the hub never sees them and the agent knows within a round trip.
    pub loss: f64,
    /// Share of requests that fail only after their (jittered) trip to the hub's side (a
    /// reset or a 503 from a load balancer in front of the hub).
    pub late_loss: f64,
    /// Network outages: length in seconds and how many per cluster-hour. Requests sent
    /// during one are blackholed (the agent notices at its request timeout).
    pub burst: Option<(f64, f64)>,
    /// Agent stalls (CPU starvation, a long GC, a frozen VM): length and rate. Nothing is
    /// sent while stalled.
    pub stalls: Option<(f64, f64)>,
    /// Hub restarts: downtime in seconds and rate. Requests fail at once while it is
    /// down; the restarted hub forgets every cluster's history and gives each a full
    /// grace period (startup grace).
    pub hub_restart: Option<(f64, f64)>,
}

/// The named parts, as documented in docs/detection.md.
pub const NAMES: &[(&str, &str)] = &[
    ("clean", "no impairment: 5 ms each way"),
    (
        "jitter30",
        "requests delayed 0 to 60 % of the interval (arrivals ±30 %)",
    ),
    ("loss5", "5 % of requests fail at once, independently"),
    (
        "late-loss5",
        "5 % of requests fail after their trip to the hub's side",
    ),
    ("burst", "a 20 s blackhole outage 4 times per cluster-hour"),
    (
        "stalls",
        "the agent freezes for 15 s 4 times per cluster-hour",
    ),
    (
        "hub-restart",
        "the hub is down 10 s and restarts with empty memory twice per hour",
    ),
];

/// The profiles `detection-sim` runs by default: each part alone and the hard combinations.
pub const DEFAULT_PROFILES: &[&str] = &[
    "clean",
    "jitter30",
    "loss5",
    "burst",
    "stalls",
    "hub-restart",
    "jitter30+loss5",
    "jitter30+late-loss5",
    "jitter30+loss5+burst+stalls+hub-restart",
];

/// A profile name that is not one of [`NAMES`].
#[derive(Debug, thiserror::Error)]
#[error("unknown profile part `{part}` in `{name}`; use parts of: {}", known())]
pub struct UnknownProfile {
    /// The whole name.
    pub name: String,
    /// The part not known.
    pub part: String,
}

/// `burst25` -> 25 s (1 to 3600).
fn seconds_after(part: &str, prefix: &str) -> Option<f64> {
    let n: u32 = part.strip_prefix(prefix)?.parse().ok()?;
    (1..=3600).contains(&n).then_some(f64::from(n))
}

fn known() -> String {
    NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

impl Profile {
    /// Parses `part+part+...`.
    pub fn parse(name: &str) -> Result<Self, UnknownProfile> {
        let mut p = Profile {
            name: name.to_owned(),
            ..Profile::default()
        };
        for part in name.split('+') {
            match part {
                "clean" => {}
                "jitter30" => p.jitter = 0.3,
                "loss5" => p.loss = 0.05,
                "late-loss5" => p.late_loss = 0.05,
                "burst" => p.burst = Some((20.0, 4.0)),
                "stalls" => p.stalls = Some((15.0, 4.0)),
                _ if seconds_after(part, "burst").is_some() => {
                    p.burst = seconds_after(part, "burst").map(|s| (s, 4.0));
                }
                _ if seconds_after(part, "stalls").is_some() => {
                    p.stalls = seconds_after(part, "stalls").map(|s| (s, 4.0));
                }
                "hub-restart" => p.hub_restart = Some((10.0, 2.0)),
                _ => {
                    return Err(UnknownProfile {
                        name: name.to_owned(),
                        part: part.to_owned(),
                    });
                }
            }
        }
        Ok(p)
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_combine_and_an_unknown_part_is_named_in_the_error() {
        let p = Profile::parse("jitter30+loss5").unwrap();
        assert_eq!((p.jitter, p.loss), (0.3, 0.05));
        assert_eq!(p.burst, None);
        assert_eq!(Profile::parse("burst25").unwrap().burst, Some((25.0, 4.0)));
        let e = Profile::parse("jitter30+lossy").unwrap_err();
        assert_eq!(e.part, "lossy");
        assert!(e.to_string().contains("loss5"), "{e}");
        for name in DEFAULT_PROFILES {
            Profile::parse(name).unwrap();
        }
    }
}

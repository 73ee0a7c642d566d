//! The rollout brake: a change of checks that turns many of the clusters it reaches
//! unhealthy at once is more likely a broken check than a broken fleet. When a
//! HealthPolicy changes, the clusters whose config it changed form the rollout's cohort;
//! if, within [`RolloutSettings::watch`], more than
//! [`RolloutSettings::max_unhealthy_percent`] of a cohort of at least
//! [`RolloutSettings::min_clusters`] fail one of the policy's checks, the brake trips:
//! clusters of the cohort that fail those checks are held (a set keeps them selected; the
//! shell marks the policy `Degraded`). It releases when the policy changes again (a fix
//! starts a new rollout) or an operator acknowledges it. A cluster that is unhealthy for
//! another reason (unreachable, or failing checks the policy did not bring) is never held.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::ids::ClusterId;

/// A HealthPolicy's namespace and name.
pub type Source = (String, String);

/// When the rollout brake trips.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RolloutSettings {
    /// Trips when more than this share of a cohort fails the policy's checks (percent).
    pub max_unhealthy_percent: u32,
    /// Smallest cohort judged: a change reaching fewer clusters never trips.
    pub min_clusters: usize,
    /// How long after the change its failures are attributed to it.
    pub watch: Duration,
}

impl Default for RolloutSettings {
    /// More than 50 % of at least 2 clusters, within 15 minutes.
    fn default() -> Self {
        Self {
            max_unhealthy_percent: 50,
            min_clusters: 2,
            watch: Duration::from_secs(15 * 60),
        }
    }
}

/// A tripped brake: which check, on how many of the cohort.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tripped {
    /// When it tripped.
    pub since: Timestamp,
    /// The check failing on most of the cohort.
    pub check: String,
    /// Cohort members failing the policy's checks.
    pub unhealthy: usize,
    /// Cohort size.
    pub of: usize,
}

#[derive(Clone, Debug)]
struct Rollout {
    checks: BTreeSet<String>,
    cohort: BTreeSet<ClusterId>,
    started: Timestamp,
    /// What acknowledges this rollout (the policy's generation or spec hash).
    id: String,
    tripped: Option<Tripped>,
}

/// Every watched rollout, by the policy that started it.
#[derive(Clone, Debug, Default)]
pub struct RolloutBrake {
    settings: RolloutSettings,
    rollouts: BTreeMap<Source, Rollout>,
    /// The cohorts of tripped rollouts a fix replaced: their clusters stay held while they
    /// recover from the broken check (reachable, not yet Healthy again).
    releasing: BTreeMap<Source, BTreeSet<ClusterId>>,
}

impl RolloutBrake {
    /// No rollout watched yet.
    pub fn new(settings: RolloutSettings) -> Self {
        Self {
            settings,
            rollouts: BTreeMap::new(),
            releasing: BTreeMap::new(),
        }
    }

    /// `source` changed at `now`, changing the config of `cohort` with `checks`: watch
    /// it. Replaces a rollout of the same source, so a fix releases a tripped brake.
    pub fn start(
        &mut self,
        source: Source,
        id: String,
        checks: BTreeSet<String>,
        cohort: BTreeSet<ClusterId>,
        now: Timestamp,
    ) {
        let rollout = Rollout {
            checks,
            cohort,
            started: now,
            id,
            tripped: None,
        };
        if let Some(old) = self.rollouts.insert(source.clone(), rollout)
            && old.tripped.is_some()
        {
            self.releasing.insert(source, old.cohort);
        }
    }

    /// The operator acknowledged `source`'s rollout `id`; returns whether that released a
    /// tripped brake. Another id (an older or newer change) acknowledges nothing.
    pub fn acknowledge(&mut self, source: &Source, id: &str) -> bool {
        let matches = self.rollouts.get(source).is_some_and(|r| r.id == id);
        matches
            && self
                .rollouts
                .remove(source)
                .is_some_and(|r| r.tripped.is_some())
    }

    /// `source` is gone: so is its rollout.
    pub fn forget(&mut self, source: &Source) {
        self.rollouts.remove(source);
        self.releasing.remove(source);
    }

    /// Judges every watched rollout at `now`; `failing(id)` is the checks a cohort member
    /// fails while reachable (empty when healthy or unreachable), `recovering(id)` whether
    /// it is reachable but not Healthy. Returns the sources that tripped now. A rollout
    /// past its watch that did not trip is forgotten; a tripped one stays until fixed or
    /// acknowledged (its counts follow the cohort); after a fix, its clusters stay held
    /// until each has recovered.
    pub fn observe(
        &mut self,
        now: Timestamp,
        failing: impl Fn(&ClusterId) -> Vec<String>,
        recovering: impl Fn(&ClusterId) -> bool,
    ) -> Vec<Source> {
        self.releasing.retain(|_, cohort| {
            cohort.retain(|id| recovering(id));
            !cohort.is_empty()
        });
        let watch = SignedDuration::try_from(self.settings.watch).unwrap_or(SignedDuration::MAX);
        let settings = self.settings;
        let mut tripped_now = Vec::new();
        self.rollouts.retain(|source, r| {
            if r.tripped.is_none() && now.duration_since(r.started) >= watch {
                return false;
            }
            let mut per_check: BTreeMap<&str, usize> = BTreeMap::new();
            let mut unhealthy = 0;
            for id in &r.cohort {
                let mut hit = false;
                for check in failing(id) {
                    if let Some(name) = r.checks.get(&check) {
                        *per_check.entry(name.as_str()).or_default() += 1;
                        hit = true;
                    }
                }
                unhealthy += usize::from(hit);
            }
            let of = r.cohort.len();
            let worst = per_check
                .iter()
                .max_by_key(|(name, n)| (**n, std::cmp::Reverse(**name)))
                .map(|(name, _)| (*name).to_owned());
            match (&mut r.tripped, worst) {
                (Some(t), worst) => {
                    t.unhealthy = unhealthy;
                    if let Some(check) = worst {
                        t.check = check;
                    }
                    true
                }
                (None, Some(check))
                    if of >= settings.min_clusters
                        && unhealthy * 100 > settings.max_unhealthy_percent as usize * of =>
                {
                    r.tripped = Some(Tripped {
                        since: now,
                        check,
                        unhealthy,
                        of,
                    });
                    tripped_now.push(source.clone());
                    true
                }
                (None, _) => true,
            }
        });
        tripped_now
    }

    /// Whether `id`, failing `failing` (and `recovering`, as for [`Self::observe`]), is
    /// held by a tripped rollout, or by one a fix replaced.
    pub fn held(&self, id: &ClusterId, failing: &[String], recovering: bool) -> bool {
        let tripped = self.rollouts.values().any(|r| {
            r.tripped.is_some()
                && r.cohort.contains(id)
                && failing.iter().any(|c| r.checks.contains(c))
        });
        tripped || (recovering && self.releasing.values().any(|c| c.contains(id)))
    }

    /// Whether any cluster may be held.
    pub fn holding(&self) -> bool {
        self.engaged() > 0 || !self.releasing.is_empty()
    }

    /// The tripped brake of `source`, with the id that acknowledges it.
    pub fn degraded(&self, source: &Source) -> Option<(&Tripped, &str)> {
        let r = self.rollouts.get(source)?;
        r.tripped.as_ref().map(|t| (t, r.id.as_str()))
    }

    /// How many rollouts have tripped the brake.
    pub fn engaged(&self) -> usize {
        self.rollouts
            .values()
            .filter(|r| r.tripped.is_some())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn ids(n: usize) -> BTreeSet<ClusterId> {
        (0..n)
            .map(|i| ClusterId::new("fleet", format!("c{i}")))
            .collect()
    }

    fn policy() -> Source {
        ("fleet".into(), "platform".into())
    }

    fn brake_over(n: usize) -> RolloutBrake {
        let mut brake = RolloutBrake::new(RolloutSettings::default());
        let checks = BTreeSet::from(["dns".to_owned()]);
        brake.start(policy(), "2".into(), checks, ids(n), t(0));
        brake
    }

    /// The first `k` clusters fail `check`.
    fn first_failing(k: usize, check: &'static str) -> impl Fn(&ClusterId) -> Vec<String> {
        move |id: &ClusterId| {
            let i: usize = id.name[1..].parse().unwrap();
            if i < k {
                vec![check.to_owned()]
            } else {
                vec![]
            }
        }
    }

    #[test]
    fn more_than_half_of_the_cohort_failing_the_new_check_trips_and_holds_them() {
        let mut brake = brake_over(5);
        assert!(
            brake
                .observe(t(10), first_failing(2, "dns"), |_| false)
                .is_empty(),
            "2 of 5 is not more than half"
        );
        assert_eq!(
            brake.observe(t(20), first_failing(3, "dns"), |_| false),
            [policy()]
        );
        let (tripped, ack) = brake.degraded(&policy()).unwrap();
        assert_eq!(
            (tripped.check.as_str(), tripped.unhealthy, tripped.of, ack),
            ("dns", 3, 5, "2")
        );
        let c0 = ClusterId::new("fleet", "c0");
        assert!(brake.held(&c0, &["dns".into()], true));
        assert!(
            !brake.held(&c0, &["nodes".into()], true),
            "failing another check is not held"
        );
        assert!(
            !brake.held(&c0, &[], false),
            "unreachable (no failing check reported) is not held"
        );
        assert_eq!(brake.engaged(), 1);
    }

    #[test]
    fn failures_of_checks_the_change_did_not_bring_do_not_trip() {
        let mut brake = brake_over(4);
        assert!(
            brake
                .observe(t(10), first_failing(4, "nodes"), |_| false)
                .is_empty()
        );
        assert_eq!(brake.engaged(), 0);
    }

    #[test]
    fn a_change_reaching_fewer_clusters_than_the_minimum_never_trips() {
        let mut brake = brake_over(1);
        assert!(
            brake
                .observe(t(10), first_failing(1, "dns"), |_| false)
                .is_empty()
        );
    }

    #[test]
    fn failures_after_the_watch_are_not_the_changes_fault() {
        let mut brake = brake_over(3);
        assert!(
            brake
                .observe(t(15 * 60), first_failing(3, "dns"), |_| false)
                .is_empty()
        );
        assert_eq!(brake.engaged(), 0);
    }

    #[test]
    fn a_fix_or_an_acknowledgement_of_that_change_releases() {
        let mut brake = brake_over(3);
        brake.observe(t(10), first_failing(3, "dns"), |_| false);
        assert!(
            !brake.acknowledge(&policy(), "1"),
            "an older change acknowledges nothing"
        );
        assert_eq!(brake.engaged(), 1);
        assert!(brake.acknowledge(&policy(), "2"));
        assert_eq!(brake.engaged(), 0);

        let mut brake = brake_over(3);
        brake.observe(t(10), first_failing(3, "dns"), |_| false);
        brake.start(
            policy(),
            "3".into(),
            BTreeSet::from(["dns".to_owned()]),
            ids(3),
            t(20),
        );
        assert_eq!(
            brake.engaged(),
            0,
            "the fix is a new rollout, watched afresh"
        );
        let c0 = ClusterId::new("fleet", "c0");
        assert!(
            brake.held(&c0, &[], true),
            "held while it recovers from the broken check"
        );
        brake.observe(t(30), |_| vec![], |id| id.name != "c0");
        assert!(!brake.held(&c0, &[], true), "released once it recovered");
    }

    #[test]
    fn a_tripped_brake_stays_past_the_watch_until_released() {
        let mut brake = brake_over(3);
        brake.observe(t(10), first_failing(3, "dns"), |_| false);
        brake.observe(t(24 * 3600), first_failing(1, "dns"), |_| false);
        let (tripped, _) = brake.degraded(&policy()).unwrap();
        assert_eq!(tripped.unhealthy, 1, "the counts follow the cohort");
    }
}

//! The detector's verdicts over hand-made arrival sequences.

use super::*;
use fleetpulse_common::api::DetectorSpec;

const GRACE: Duration = Duration::from_secs(40);
const FIXED: Detector = Detector::Fixed { grace: GRACE };

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn phi_detector(threshold: Option<u32>, min_silence: Option<u32>) -> Detector {
    Detector::for_spec(&HeartbeatSpec {
        interval_seconds: 10,
        grace_period_seconds: 40,
        detector: DetectorSpec {
            kind: DetectorKind::PhiAccrual,
            phi_threshold: threshold,
            min_silence_seconds: min_silence,
        },
    })
}

/// A cluster heard at `t0`, then every `gap` for `count` more heartbeats; returns the
/// liveness and the last heartbeat time.
fn regular(t0: Instant, gap: Duration, count: u32) -> (Liveness, Instant) {
    let mut l = Liveness::new(t0);
    let mut t = t0;
    l.heartbeat(t);
    for _ in 0..count {
        t += gap;
        l.heartbeat(t);
    }
    (l, t)
}

#[test]
fn heartbeat_within_grace_is_reachable_and_silence_past_grace_is_not() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0);
    l.heartbeat(t0 + secs(5));
    assert_eq!(l.judge(t0 + secs(45), &FIXED), Reachability::Reachable);
    assert_eq!(
        l.judge(t0 + secs(46), &FIXED),
        Reachability::Unreachable {
            silent_for: secs(41),
            ever_reported: true
        }
    );
    assert_eq!(l.deadline(&FIXED), t0 + secs(45));
}

#[test]
fn a_new_or_restarted_hub_judges_no_cluster_before_a_full_grace_period() {
    let t0 = Instant::now();
    let l = Liveness::new(t0);
    assert_eq!(l.judge(t0 + secs(40), &FIXED), Reachability::Pending);
    assert_eq!(
        l.judge(t0 + secs(41), &FIXED),
        Reachability::Unreachable {
            silent_for: secs(41),
            ever_reported: false
        }
    );
}

#[test]
fn reset_grace_postpones_judgement_of_a_silent_cluster() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0);
    l.heartbeat(t0);
    l.reset_grace(t0 + secs(100));
    assert_eq!(l.judge(t0 + secs(120), &FIXED), Reachability::Pending);
    assert!(matches!(
        l.judge(t0 + secs(141), &FIXED),
        Reachability::Unreachable { .. }
    ));
    assert_eq!(l.deadline(&FIXED), t0 + secs(140));
}

#[test]
fn an_out_of_order_older_heartbeat_never_moves_the_clock_back_nor_counts_as_a_gap() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0);
    l.heartbeat(t0 + secs(30));
    l.heartbeat(t0 + secs(10));
    assert_eq!(l.last_heartbeat(), Some(t0 + secs(30)));
    assert!(l.history().is_empty());
}

#[test]
fn phi_accrual_allows_the_grace_period_until_the_history_is_trusted() {
    let t0 = Instant::now();
    let detector = phi_detector(None, None);
    let (l, last) = regular(t0, secs(10), phi::MIN_SAMPLES as u32 - 1);
    assert_eq!(l.deadline(&detector), last + GRACE);
    let (l, last) = regular(t0, secs(10), phi::MIN_SAMPLES as u32);
    assert!(l.deadline(&detector) < last + GRACE);
}

#[test]
fn phi_accrual_on_a_regular_history_stops_at_the_floor_of_two_intervals() {
    let t0 = Instant::now();
    let detector = phi_detector(None, None);
    let (l, last) = regular(t0, secs(10), 20);
    assert_eq!(l.deadline(&detector), last + secs(20));
    assert_eq!(l.judge(last + secs(20), &detector), Reachability::Reachable);
    assert!(matches!(
        l.judge(last + secs(21), &detector),
        Reachability::Unreachable { .. }
    ));
}

#[test]
fn phi_accrual_waits_longer_for_a_cluster_whose_arrivals_vary_more() {
    let t0 = Instant::now();
    let detector = phi_detector(Some(8), None);
    let mut steady = Liveness::new(t0);
    let mut jittery = Liveness::new(t0);
    let mut t = t0;
    steady.heartbeat(t);
    jittery.heartbeat(t);
    for i in 0..40u64 {
        t += secs(10);
        steady.heartbeat(t);
        jittery.heartbeat(t + Duration::from_millis(if i % 2 == 0 { 0 } else { 4_000 }));
    }
    let steady_allows = steady.deadline(&detector) - t;
    let jittery_allows = jittery.deadline(&detector) - t;
    assert_eq!(steady_allows, secs(20), "the floor");
    assert!(
        jittery_allows > secs(25) && jittery_allows <= GRACE,
        "{jittery_allows:?}"
    );
}

#[test]
fn phi_accrual_never_waits_past_the_grace_period_nor_under_half_of_it() {
    let t0 = Instant::now();
    let low_floor = phi_detector(Some(1), Some(11));
    let (l, last) = regular(t0, secs(10), 20);
    assert_eq!(l.deadline(&low_floor), last + secs(20), "half the grace");
    let mut l = Liveness::new(t0);
    let mut t = t0;
    for i in 0..40u64 {
        t += secs(if i % 2 == 0 { 1 } else { 39 });
        l.heartbeat(t);
    }
    assert_eq!(l.deadline(&phi_detector(Some(12), None)), t + GRACE);
}

#[test]
fn phi_grows_with_the_silence() {
    let t0 = Instant::now();
    let Detector::PhiAccrual(phi) = phi_detector(None, None) else {
        unreachable!("asked for phi accrual")
    };
    let (l, _) = regular(t0, secs(10), 20);
    let at = |s| phi.phi(l.history(), secs(s)).unwrap();
    assert!(at(10) < 1.0);
    assert!(at(12) > at(10));
    assert!(at(14) > 4.0, "{}", at(14));
}

#[test]
fn a_carried_over_heartbeat_feeds_the_brake_but_not_the_detector() {
    let t0 = Instant::now();
    let start = t0 + secs(100);
    // Heard 15 s before this process took over: within two grace periods, so the brake
    // counts it as heard at the take-over (the silence before it was the hub's own).
    let mut recent = Liveness::new(start);
    recent.carry_over(start - secs(15), start);
    assert_eq!(recent.brake_last_heartbeat(GRACE), Some(start));
    // The detector still gives it a whole grace period from the take-over.
    assert_eq!(recent.judge(start + GRACE, &FIXED), Reachability::Pending);
    assert!(matches!(
        recent.judge(start + GRACE + secs(1), &FIXED),
        Reachability::Unreachable {
            ever_reported: false,
            ..
        }
    ));
    // Heard long before: it does not count as reporting.
    let mut silent = Liveness::new(start);
    silent.carry_over(t0, start);
    assert_eq!(silent.brake_last_heartbeat(GRACE), Some(t0));
    // A heartbeat to this process replaces what was carried over.
    recent.heartbeat(start + secs(3));
    assert_eq!(recent.brake_last_heartbeat(GRACE), Some(start + secs(3)));
    // Nothing carried over, nothing heard: the brake does not count it.
    assert_eq!(Liveness::new(start).brake_last_heartbeat(GRACE), None);
}

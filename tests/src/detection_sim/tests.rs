//! The simulator's own behaviour on small runs.

use super::*;

fn run(clusters: u32, hours: f64) -> Run {
    Run {
        clusters,
        hours,
        interval_seconds: 10,
        grace_seconds: 40,
        tick_seconds: 1.0,
        seed: 7,
        schedule: Schedule::default(),
        pacing: Pacing::default(),
        hedge: true,
    }
}

fn sim(profile: &str, detector: &str, r: Run) -> Outcome {
    simulate(
        &Profile::parse(profile).unwrap(),
        &DetectorChoice::parse(detector).unwrap(),
        r,
    )
}

#[test]
fn a_clean_network_gives_no_false_verdict_and_detects_deaths_within_grace_and_a_tick() {
    let out = sim("clean", "fixed", run(200, 5.0));
    assert_eq!(out.false_unreachable, 0, "{out}");
    assert_eq!(out.detections.len(), 200);
    assert!(out.detection_quantile(0.0) > 40.0 - 10.1, "{out}");
    assert!(out.detection_quantile(1.0) <= 41.0, "{out}");
    let per_hour = out.accepted as f64 / out.cluster_hours;
    assert!(
        (355.0..=361.0).contains(&per_hour),
        "{per_hour} heartbeats per hour"
    );
    assert!(
        out.to_string().starts_with(
            "profile=clean detector=fixed clusters=200 hours=1000 false_unreachable=0 "
        )
    );
}

#[test]
fn stalls_longer_than_the_adaptive_floor_are_misjudged_and_the_fixed_grace_rides_them_out() {
    let phi = sim("stalls", "phi", run(100, 10.0));
    let fixed = sim("stalls", "fixed", run(100, 10.0));
    assert!(phi.false_unreachable > 0, "{phi}");
    assert_eq!(fixed.false_unreachable, 0, "{fixed}");
}

#[test]
fn failed_requests_are_retried_so_loss_costs_attempts_not_verdicts() {
    let out = sim("loss5", "fixed", run(100, 5.0));
    assert_eq!(out.false_unreachable, 0, "{out}");
    let extra = out.attempts as f64 / out.accepted as f64 - 1.0;
    assert!(
        (0.03..0.08).contains(&extra),
        "retries per heartbeat {extra}"
    );
}

#[test]
fn pacing_from_the_send_keeps_one_heartbeat_per_interval_on_a_slow_network() {
    let from_send = sim("jitter30", "fixed", run(50, 5.0));
    let from_answer = sim(
        "jitter30",
        "fixed",
        Run {
            pacing: Pacing::FromAnswer,
            ..run(50, 5.0)
        },
    );
    let per_hour = |o: &Outcome| o.accepted as f64 / o.cluster_hours;
    // 10 s after each send: 360 an hour. 10 s after each answer, the mean 3 s delay
    // adds to every gap: about 277 an hour.
    assert!(
        (355.0..=361.0).contains(&per_hour(&from_send)),
        "{from_send}"
    );
    assert!(
        (265.0..=290.0).contains(&per_hour(&from_answer)),
        "{from_answer}"
    );
}

#[test]
fn a_death_while_the_hub_is_down_is_judged_a_grace_period_after_the_hub_returns() {
    // Two 10 s downtimes an hour: about one death in 180 falls in one.
    let out = sim("hub-restart", "fixed", run(2000, 0.5));
    assert!(out.deaths_while_hub_down > 0, "{out}");
    assert!(out.detection_quantile(1.0) > 41.0, "{out}");
    assert!(out.detect_max_after_hub_up <= 41.0, "{out}");
    assert!(out.detect_max_after_hub_up >= 39.0, "{out}");
}

#[test]
fn the_same_seed_gives_the_same_figures() {
    let a = sim("jitter30+loss5+hub-restart", "phi", run(20, 5.0));
    let b = sim("jitter30+loss5+hub-restart", "phi", run(20, 5.0));
    assert_eq!(a.to_string(), b.to_string());
    assert_eq!(a.attempts, b.attempts);
}

#[test]
fn detector_names_parse_and_a_wrong_one_says_what_is_allowed() {
    assert_eq!(
        DetectorChoice::parse("phi8").unwrap().spec.phi_threshold,
        Some(8)
    );
    let e = DetectorChoice::parse("phi13").unwrap_err();
    assert!(e.to_string().contains("phi<threshold 1-12>"), "{e}");
}

use std::net::SocketAddr;

use axum::body::to_bytes;
use axum::http::StatusCode;

use super::*;

const WINDOW: Duration = Duration::from_secs(60);

fn limit(allowed: u32) -> FailureLimit {
    FailureLimit::new(Some(Limit {
        allowed,
        window: WINDOW,
    }))
}

fn source(addr: &str) -> Option<Source> {
    Some(Source::of(addr.parse::<SocketAddr>().unwrap()))
}

#[test]
fn failed_keys_signatures_jws_and_admin_tokens_count_and_nothing_else_does() {
    let counted: Vec<&str> = RejectCode::ALL
        .into_iter()
        .filter(|c| counts(*c))
        .map(RejectCode::as_str)
        .collect();
    assert_eq!(
        counted,
        [
            "malformed_jws",
            "unknown_key",
            "key_revoked",
            "key_not_for_cluster",
            "bad_signature",
            "key_retired",
            "unauthenticated",
        ]
    );
}

#[test]
fn a_source_over_its_limit_is_refused_until_its_window_ends_and_others_are_not() {
    let limit = limit(3);
    let (attacker, other) = (source("10.0.0.1:4000"), source("10.0.0.2:4000"));
    let t0 = Instant::now();
    for _ in 0..3 {
        assert!(limit.check_at(attacker, t0).is_ok());
        limit.refused_at(attacker, RejectCode::BadSignature, t0);
    }
    let limited = limit.check_at(attacker, t0 + Duration::from_secs(20));
    let limited = limited.expect_err("the fourth try is refused");
    assert_eq!(limited.label(), "rate_limited");
    assert_eq!(limited.retry_after, Duration::from_secs(40));
    assert!(limit.check_at(other, t0).is_ok(), "another source is not");
    assert!(
        limit.check_at(source("10.0.0.1:5000"), t0).is_err(),
        "another port of the same address is the same source"
    );
    assert!(limit.check_at(attacker, t0 + WINDOW).is_ok(), "lifted");
}

#[test]
fn refusals_of_normal_running_and_successes_never_limit_a_source() {
    let limit = limit(3);
    let agent = source("10.0.0.1:4000");
    let t0 = Instant::now();
    for code in RejectCode::ALL.into_iter().filter(|c| !counts(*c)) {
        for _ in 0..10 {
            assert!(limit.check_at(agent, t0).is_ok(), "{code}");
            limit.refused_at(agent, code, t0);
        }
    }
    // Successes are not reported at all: any number of checks leaves the source allowed.
    for _ in 0..1_000 {
        assert!(limit.check_at(agent, t0).is_ok());
    }
}

#[test]
fn ipv6_sources_are_counted_by_their_64_prefix_and_mapped_ipv4_as_ipv4() {
    let limit = limit(1);
    let t0 = Instant::now();
    limit.refused_at(source("[2001:db8:1:2::1]:443"), RejectCode::UnknownKey, t0);
    let same_host = source("[2001:db8:1:2:ffff::9]:443");
    assert!(limit.check_at(same_host, t0).is_err());
    assert!(limit.check_at(source("[2001:db8:1:3::1]:443"), t0).is_ok());
    assert_eq!(same_host.unwrap().to_string(), "2001:db8:1:2::/64");
    limit.refused_at(
        source("[::ffff:10.1.2.3]:443"),
        RejectCode::MalformedJws,
        t0,
    );
    assert!(limit.check_at(source("10.1.2.3:80"), t0).is_err());
}

#[test]
fn requests_without_a_peer_address_and_a_disabled_limit_are_never_limited() {
    let limit = limit(1);
    let t0 = Instant::now();
    limit.refused_at(None, RejectCode::BadSignature, t0);
    assert!(limit.check_at(None, t0).is_ok());
    let off = FailureLimit::new(None);
    let attacker = source("10.0.0.1:1");
    for _ in 0..100 {
        off.refused_at(attacker, RejectCode::BadSignature, t0);
    }
    assert!(off.check_at(attacker, t0).is_ok());
}

#[test]
fn each_source_is_counted_as_limited_once_per_window() {
    let limit = limit(2);
    let counter = Counter::default();
    limit.count_limited_sources_in(counter.clone());
    let attacker = source("10.0.0.1:1");
    let t0 = Instant::now();
    for _ in 0..10 {
        limit.refused_at(attacker, RejectCode::BadSignature, t0);
    }
    assert_eq!(counter.get(), 1);
    for _ in 0..2 {
        limit.refused_at(attacker, RejectCode::BadSignature, t0 + WINDOW);
    }
    assert_eq!(counter.get(), 2, "limited again in the next window");
}

#[tokio::test]
async fn the_answer_is_429_rate_limited_with_retry_after_in_whole_seconds() {
    let limit = limit(1);
    let attacker = source("10.0.0.1:1");
    let t0 = Instant::now();
    limit.refused_at(attacker, RejectCode::BadSignature, t0);
    let limited = limit
        .check_at(attacker, t0 + Duration::from_millis(500))
        .unwrap_err();
    let response = limited.into_response();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()[RETRY_AFTER], "60");
    let body = to_bytes(response.into_body(), 4096).await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["code"], "rate_limited");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("10.0.0.1") && message.contains("--failure-limit"),
        "{message}"
    );
}

#[test]
fn on_the_agents_port_only_failures_past_the_limit_are_answered_429() {
    let limit = limit(2);
    let forger = source("10.0.0.1:1");
    let t0 = Instant::now();
    for _ in 0..2 {
        assert!(
            limit
                .failed_at(forger, RejectCode::BadSignature, t0)
                .is_ok()
        );
    }
    let limited = limit.failed_at(forger, RejectCode::BadSignature, t0);
    assert!(limited.is_err(), "the third failure is answered 429");
    assert!(
        limit.failed_at(forger, RejectCode::Replayed, t0).is_ok(),
        "a refusal that does not count keeps its own answer"
    );
    assert!(
        limit
            .failed_at(forger, RejectCode::BadSignature, t0 + WINDOW)
            .is_ok(),
        "the next window starts afresh"
    );
}

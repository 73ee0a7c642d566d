//! The per-source limit on authentication failures of the real `fleetpulse-hub serve`
//! (`--failure-limit`, `--failure-limit-window-seconds`), shared by both listeners: past
//! the limit, a source's heartbeats, config pulls and admin requests are answered 429
//! `rate_limited` without being verified, successes never count, other sources are not
//! limited, and the limit lifts once the window ends.
//!
//! Every loopback address is this host, so the clients here send from 127.0.0.2 and
//! 127.0.0.3 (bound as their local address) while the real agent and the operator's reads
//! come from 127.0.0.1: three sources on one machine.

use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fleetpulse_agent::AgentOptions;
use fleetpulse_common::api::condition::{REACHABLE, Status};
use fleetpulse_tests::admin_api::{self, sample};
use fleetpulse_tests::embedded_hub::EmbeddedHub;
use fleetpulse_tests::fleet::{SimCluster, condition_of, write_clusters};
use fleetpulse_tests::hand_agent::{Answer, HandAgent, answer};
use fleetpulse_tests::loadgen;
use fleetpulse_tests::pki::Pki;
use fleetpulse_tests::wait;

const DEADLINE: Duration = Duration::from_secs(60);
/// Failures allowed per source per window, and the window.
const LIMIT: usize = 5;
const WINDOW: Duration = Duration::from_secs(4);
const TOKEN: &str = "Zr7-failure-limit-admin-token";

/// An embedded hub under `dir` with `clusters` MemberClusters (a second's interval, 4 s
/// of grace), the failure limit of this test and `extra` flags.
fn start_hub(dir: &Path, clusters: usize, extra: &[String]) -> (Pki, EmbeddedHub, Vec<SimCluster>) {
    let pki = Pki::generate(dir).unwrap();
    let manifests = dir.join("manifests");
    let clusters = write_clusters(&manifests, clusters, 1, 4).unwrap();
    let (limit, window) = (LIMIT.to_string(), WINDOW.as_secs().to_string());
    let mut flags = vec![
        "--failure-limit",
        limit.as_str(),
        "--failure-limit-window-seconds",
        window.as_str(),
    ];
    flags.extend(extra.iter().map(String::as_str));
    let data = dir.join("data");
    let hub = tokio::task::block_in_place(|| EmbeddedHub::spawn(&manifests, &data, &pki, &flags))
        .unwrap();
    (pki, hub, clusters)
}

/// A client trusting the hub's CA that connects from the loopback address `from`.
fn client_from(pki: &Pki, from: [u8; 4]) -> reqwest::Client {
    let ca = std::fs::read(&pki.ca_cert).unwrap();
    loadgen::client::client_from(&ca, loadgen::client::Transport::Http2, Ipv4Addr::from(from))
        .unwrap()
}

async fn admin_get(http: &reqwest::Client, url: &str, token: &str) -> Answer {
    answer(http.get(url).bearer_auth(token).send().await.unwrap()).await
}

fn refused(code: &str) -> String {
    format!("fleetpulse_hub_heartbeats_total{{result=\"{code}\"}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_heartbeats_past_the_limit_are_answered_429_until_the_window_ends_and_signed_ones_served()
 {
    let dir = tempfile::tempdir().unwrap();
    let (pki, hub, clusters) = start_hub(dir.path(), 2, &[]);
    // edge-1: a real agent from 127.0.0.1, reporting every second.
    let mut options = AgentOptions::new(
        hub.server.parse().unwrap(),
        clusters[0].id.clone(),
        clusters[0].key.clone(),
    );
    options.hub_ca_pem = Some(std::fs::read(&pki.ca_cert).unwrap());
    options.interval = Duration::from_secs(1);
    let _agent = fleetpulse_agent::spawn(options).unwrap();
    let reachable = || {
        hub.clusters()
            .is_some_and(|c| condition_of(&c, &clusters[0].id, REACHABLE) == Status::True)
    };
    tokio::task::block_in_place(|| wait::blocking_until("edge-1 Reachable", DEADLINE, reachable))
        .unwrap();

    // edge-2 from 127.0.0.2: three times the limit of accepted reports counts nothing.
    let mut edge2 = HandAgent::new(client_from(&pki, [127, 0, 0, 2]), &hub.server, &clusters[1]);
    for i in 0..3 * LIMIT {
        assert_eq!(edge2.heartbeat(false).await.0, 200, "report {i} accepted");
    }
    // Forged reports: the first LIMIT are refused as they are, the rest answered 429;
    // a correctly signed report or config pull from the same source is still served.
    let first_forged = Instant::now();
    // Every 429 this test receives on a heartbeat; the hub must count exactly these.
    let limited = AtomicUsize::new(0);
    for _ in 0..LIMIT {
        let (status, code, _) = edge2.heartbeat(true).await;
        assert_eq!((status, code.as_str()), (401, "bad_signature"));
    }
    for _ in 0..20 {
        let (status, code, retry) = edge2.heartbeat(true).await;
        assert_eq!((status, code.as_str()), (429, "rate_limited"));
        limited.fetch_add(1, Ordering::Relaxed);
        let retry = retry.expect("a Retry-After header");
        assert!(
            (1..=WINDOW.as_secs()).contains(&retry),
            "Retry-After {retry}"
        );
    }
    assert_eq!(
        edge2.heartbeat(false).await.0,
        200,
        "a report that verifies is served whatever its source's count"
    );
    assert_eq!(
        edge2.config(&clusters[1].key).await.0,
        200,
        "a signed config pull too"
    );
    let (status, code, _) = edge2.config(&clusters[0].key).await;
    assert_eq!(
        (status, code.as_str()),
        (429, "rate_limited"),
        "a config pull signed by another cluster's key is limited"
    );

    let ca = pki.ca_cert.clone();
    let (status, metrics) = admin_api::get(&ca, &format!("{}/metrics", hub.admin), None)
        .await
        .unwrap();
    assert_eq!(
        status, 200,
        "the operator's address (127.0.0.1) is not limited"
    );
    assert_eq!(
        sample(&metrics, &refused("bad_signature")),
        LIMIT as f64,
        "only {LIMIT} answered as themselves"
    );
    let config_limited = "fleetpulse_hub_config_requests_total{result=\"rate_limited\"}";
    assert_eq!(sample(&metrics, config_limited), 1.0);
    assert_eq!(
        sample(&metrics, "fleetpulse_hub_failure_limited_sources_total"),
        1.0,
        "one source limited, once"
    );
    let line = hub.process.log_line("allowance of authentication failures");
    assert!(
        line.is_some_and(|l| l.contains("127.0.0.2")),
        "the hub names the source"
    );

    // The window ends: a forged report is answered 401 again (polling with forged
    // reports), no earlier than a window after the first forgery.
    wait::until_some("the limit to lift", DEADLINE, || {
        let (request, limited) = (edge2.next_heartbeat(true), &limited);
        async move {
            let (status, _, _) = answer(request.send().await.ok()?).await;
            if status == 429 {
                limited.fetch_add(1, Ordering::Relaxed);
            }
            (status == 401).then_some(())
        }
    })
    .await
    .unwrap();
    let lifted = first_forged.elapsed();
    assert!(lifted >= WINDOW, "lifted after {lifted:?}");
    // edge-1's agent, from 127.0.0.1, reported all along: none of the hub's 429s were its.
    let (_, metrics) = admin_api::get(&ca, &format!("{}/metrics", hub.admin), None)
        .await
        .unwrap();
    let limited = limited.load(Ordering::Relaxed) as f64;
    assert_eq!(sample(&metrics, &refused("rate_limited")), limited);
    assert!(
        tokio::task::block_in_place(reachable),
        "edge-1 stayed Reachable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_requests_answered_401_past_the_limit_are_answered_429_on_both_listeners() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("admin-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let token_flags = [
        "--admin-token-file".into(),
        token_file.display().to_string(),
    ];
    let (pki, hub, clusters) = start_hub(dir.path(), 1, &token_flags);
    let (operator, guesser) = (
        client_from(&pki, [127, 0, 0, 1]),
        client_from(&pki, [127, 0, 0, 3]),
    );
    let list = format!("{}/v1/memberclusters", hub.admin);
    wait::until_some("the admin API to serve", DEADLINE, || async {
        (admin_get(&operator, &list, TOKEN).await.0 == 200).then_some(())
    })
    .await
    .unwrap();
    for _ in 0..2 * LIMIT {
        assert_eq!(
            admin_get(&guesser, &list, TOKEN).await.0,
            200,
            "successes never count"
        );
    }

    let first_guess = Instant::now();
    for i in 0..LIMIT {
        let (status, code, _) = admin_get(&guesser, &list, &format!("guess-{i}")).await;
        assert_eq!((status, code.as_str()), (401, "unauthenticated"));
    }
    let (status, code, retry) = admin_get(&guesser, &list, TOKEN).await;
    assert_eq!(
        (status, code.as_str()),
        (429, "rate_limited"),
        "even with the token"
    );
    assert!(
        retry.is_some_and(|r| (1..=WINDOW.as_secs()).contains(&r)),
        "{retry:?}"
    );
    // The limit is the source's on both listeners: its forged heartbeats are answered 429
    // too, while a signed one is served.
    let mut agent = HandAgent::new(guesser.clone(), &hub.server, &clusters[0]);
    assert_eq!(agent.heartbeat(true).await.1, "rate_limited");
    assert_eq!(
        agent.heartbeat(false).await.0,
        200,
        "a signed heartbeat is served"
    );
    assert_eq!(
        admin_get(&operator, &list, TOKEN).await.0,
        200,
        "another source is not"
    );
    let metrics = format!("{}/metrics", hub.admin);
    let text = operator
        .get(&metrics)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let text = text.text().await.unwrap();
    assert_eq!(
        sample(&text, "fleetpulse_hub_failure_limited_sources_total"),
        1.0
    );

    wait::until_some("the limit to lift", DEADLINE, || async {
        (admin_get(&guesser, &list, TOKEN).await.0 == 200).then_some(())
    })
    .await
    .unwrap();
    assert!(
        first_guess.elapsed() >= WINDOW,
        "lifted after {:?}",
        first_guess.elapsed()
    );
    assert_eq!(
        agent.heartbeat(true).await.1,
        "bad_signature",
        "and on the agents' port"
    );
}

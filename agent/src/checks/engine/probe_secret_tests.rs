//! HTTP probe headers from Secrets, against the in-process Kubernetes API test server and a
//! loopback server that requires the header: the agent's check engine reads the Secret in
//! its checks namespace and the probe passes; a missing Secret or key fails only that
//! check, naming the Secret and key and never a value; creating the Secret heals it.

use std::net::SocketAddr;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use fleetpulse_common::api::{ClusterCheck, HttpHeader, HttpProbe};
use fleetpulse_common::protocol::report::{AgentConfig, CheckResult};
use fleetpulse_kubesim::KubeSim;

use super::tests::results_when;
use super::{CheckEngine, EngineOptions};
use crate::checks::ChecksSource;
use crate::checks::resources::{KubeReader, Reader};

const CHECKS_NAMESPACE: &str = "fleetpulse-checks";
const TOKEN: &str = "Bearer s3cret-token";

/// `/private` answers 200 only with `Authorization: Bearer s3cret-token`, else 401.
async fn serve_private() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route(
        "/private",
        get(|headers: HeaderMap| async move {
            match headers.get("authorization").map(|v| v.as_bytes()) {
                Some(v) if v == TOKEN.as_bytes() => StatusCode::OK,
                _ => StatusCode::UNAUTHORIZED,
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn create_secret(sim: &KubeSim, name: &str, data: serde_json::Value) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": CHECKS_NAMESPACE}, "stringData": data
    }))
    .unwrap();
    Api::<Secret>::namespaced(sim.client(), CHECKS_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

fn probe(name: &str, addr: SocketAddr, header: HttpHeader) -> ClusterCheck {
    ClusterCheck {
        name: name.into(),
        http: Some(HttpProbe {
            url: Some(format!("http://{addr}/private")),
            http_headers: vec![header],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn result<'a>(results: &'a [CheckResult], name: &str) -> Option<&'a CheckResult> {
    results
        .iter()
        .find(|r| r.name == name && r.message != "not run yet")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_from_a_secret_is_sent_and_a_missing_secret_fails_only_its_check() {
    let sim = KubeSim::new();
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": CHECKS_NAMESPACE}})).unwrap();
    Api::<Namespace>::all(sim.client())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    create_secret(&sim, "probe-token", json!({"token": TOKEN})).await;
    let addr = serve_private().await;

    let stop = CancellationToken::new();
    let options = EngineOptions {
        checks_namespace: CHECKS_NAMESPACE.into(),
        ..Default::default()
    };
    let reader = Reader::Kube(KubeReader::new(sim.client()));
    let engine = CheckEngine::spawn(reader, options, stop.clone());
    engine.apply_config(&AgentConfig {
        generation: 1,
        interval_seconds: 1,
        liveness_checks: vec![
            probe(
                "private-api",
                addr,
                HttpHeader::from_secret("Authorization", "probe-token", "token"),
            ),
            probe(
                "no-secret",
                addr,
                HttpHeader::from_secret("Authorization", "absent", "token"),
            ),
            probe(
                "no-key",
                addr,
                HttpHeader::from_secret("Authorization", "probe-token", "tokn"),
            ),
            probe("unauthenticated", addr, HttpHeader::inline("X-Other", "1")),
        ],
        ..Default::default()
    });
    let results = results_when(&engine, "every probe ran", |r| {
        ["private-api", "no-secret", "no-key", "unauthenticated"]
            .iter()
            .all(|n| result(r, n).is_some())
    })
    .await;
    let private = result(&results, "private-api").unwrap();
    assert!(private.passing, "{}", private.message);
    let no_secret = result(&results, "no-secret").unwrap();
    assert!(!no_secret.passing);
    assert!(
        no_secret.message.contains("httpHeaders[0] (Authorization)")
            && no_secret
                .message
                .contains("Secret fleetpulse-checks/absent not found"),
        "{}",
        no_secret.message
    );
    let no_key = result(&results, "no-key").unwrap();
    assert!(!no_key.passing);
    assert!(
        no_key
            .message
            .contains("Secret fleetpulse-checks/probe-token has no key \"tokn\"")
            && no_key.message.contains("its keys: token"),
        "{}",
        no_key.message
    );
    let other = result(&results, "unauthenticated").unwrap();
    assert!(
        !other.passing && other.message.contains("401"),
        "{}",
        other.message
    );
    let all = format!("{results:?}");
    assert!(!all.contains("s3cret"), "a header value in a result: {all}");

    // The missing Secret is created: the check passes on a later run (a missing Secret is
    // not cached).
    create_secret(&sim, "absent", json!({"token": TOKEN})).await;
    results_when(&engine, "the created Secret to be read", |r| {
        result(r, "no-secret").is_some_and(|c| c.passing)
    })
    .await;
    stop.cancel();
}

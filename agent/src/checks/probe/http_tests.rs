//! The HTTP probe against real axum servers on 127.0.0.1: statuses, redirects, timeouts,
//! headers, methods, and a closed port.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use fleetpulse_common::api::check::{HttpHeader, HttpProbe};

use super::run_http;

const TIMEOUT: Duration = Duration::from_secs(5);

/// Headers the `/headers` route received, last request first.
type Seen = Arc<Mutex<Vec<HeaderMap>>>;

/// Serves the test routes on 127.0.0.1 and returns the address and the headers seen.
async fn serve() -> (SocketAddr, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // `localhost` is another host name than `127.0.0.1`, as the kubelet compares them.
    let elsewhere = format!("http://localhost:{}/healthz", addr.port());
    let seen: Seen = Arc::default();
    let recorded = seen.clone();
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/unavailable",
            get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "database\n  down") }),
        )
        .route("/teapot", get(|| async { StatusCode::IM_A_TEAPOT }))
        .route("/redirect", get(|| async { found("/healthz") }))
        .route("/loop", get(|| async { found("/loop") }))
        .route(
            "/elsewhere",
            get(move || {
                let location = elsewhere.clone();
                async move { found(&location) }
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                "too late"
            }),
        )
        .route(
            "/headers",
            get(move |headers: HeaderMap| async move {
                recorded.lock().unwrap().push(headers);
                "seen"
            }),
        )
        .route(
            "/method",
            any(|method: Method| async move {
                if method == Method::POST {
                    StatusCode::NO_CONTENT
                } else {
                    StatusCode::METHOD_NOT_ALLOWED
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, seen)
}

fn found(location: &str) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, location.to_owned())]).into_response()
}

fn probe(url: String) -> HttpProbe {
    HttpProbe {
        url: Some(url),
        ..HttpProbe::default()
    }
}

#[tokio::test]
async fn status_200_passes() {
    let (addr, _) = serve().await;
    let outcome = run_http(&probe(format!("http://{addr}/healthz")), TIMEOUT).await;
    assert!(outcome.passing, "{}", outcome.message);
    assert_eq!(
        outcome.message,
        format!("GET http://{addr}/healthz: 200 OK")
    );
    assert_eq!(outcome.success_rate_percent, None);
}

#[tokio::test]
async fn status_503_fails_with_expected_range_and_body() {
    let (addr, _) = serve().await;
    let outcome = run_http(&probe(format!("http://{addr}/unavailable")), TIMEOUT).await;
    assert!(!outcome.passing);
    assert_eq!(
        outcome.message,
        format!(
            "GET http://{addr}/unavailable: 503 Service Unavailable (expected 200-399): \
             database down"
        )
    );
}

#[tokio::test]
async fn listed_expected_status_passes_and_others_fail() {
    let (addr, _) = serve().await;
    let teapot = HttpProbe {
        expected_statuses: vec![418],
        ..probe(format!("http://{addr}/teapot"))
    };
    let outcome = run_http(&teapot, TIMEOUT).await;
    assert!(outcome.passing, "{}", outcome.message);
    let healthz = HttpProbe {
        expected_statuses: vec![204, 418],
        ..probe(format!("http://{addr}/healthz"))
    };
    let outcome = run_http(&healthz, TIMEOUT).await;
    assert!(!outcome.passing);
    assert!(
        outcome
            .message
            .ends_with("200 OK (expected one of 204, 418): ok"),
        "{}",
        outcome.message
    );
}

#[tokio::test]
async fn same_host_redirect_is_followed() {
    let (addr, _) = serve().await;
    let outcome = run_http(&probe(format!("http://{addr}/redirect")), TIMEOUT).await;
    assert!(outcome.passing, "{}", outcome.message);
    assert_eq!(
        outcome.message,
        format!("GET http://{addr}/redirect: 200 OK (redirected to http://{addr}/healthz)")
    );
}

#[tokio::test]
async fn redirect_to_another_host_is_not_followed_and_passes_as_3xx() {
    let (addr, _) = serve().await;
    let outcome = run_http(&probe(format!("http://{addr}/elsewhere")), TIMEOUT).await;
    assert!(outcome.passing, "{}", outcome.message);
    assert_eq!(
        outcome.message,
        format!(
            "GET http://{addr}/elsewhere: 302 Found (redirect to http://localhost:{}/healthz \
             on another host, not followed)",
            addr.port()
        )
    );
}

#[tokio::test]
async fn endless_same_host_redirects_stop_after_ten() {
    let (addr, _) = serve().await;
    let outcome = run_http(&probe(format!("http://{addr}/loop")), TIMEOUT).await;
    assert!(!outcome.passing);
    assert_eq!(
        outcome.message,
        format!("GET http://{addr}/loop: stopped after 10 redirects")
    );
}

#[tokio::test]
async fn slow_endpoint_times_out() {
    let (addr, _) = serve().await;
    let outcome = run_http(
        &probe(format!("http://{addr}/slow")),
        Duration::from_millis(300),
    )
    .await;
    assert!(!outcome.passing);
    assert_eq!(
        outcome.message,
        format!("GET http://{addr}/slow: timed out after 300ms")
    );
}

#[tokio::test]
async fn closed_port_fails_with_connection_refused() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let outcome = run_http(&probe(format!("http://{addr}/")), TIMEOUT).await;
    assert!(!outcome.passing);
    assert_eq!(
        outcome.message,
        format!("GET http://{addr}/: connection refused")
    );
}

#[tokio::test]
async fn custom_headers_are_sent_and_override_the_defaults() {
    let (addr, seen) = serve().await;
    let spec = HttpProbe {
        http_headers: vec![
            HttpHeader::inline("X-Probe", "fleetpulse"),
            HttpHeader::inline("Accept", "application/json"),
        ],
        ..probe(format!("http://{addr}/headers"))
    };
    let outcome = run_http(&spec, TIMEOUT).await;
    assert!(outcome.passing, "{}", outcome.message);
    let seen = seen.lock().unwrap();
    let headers = seen.last().expect("the route saw the request");
    assert_eq!(headers["x-probe"], "fleetpulse");
    assert_eq!(headers["accept"], "application/json");
    let agent = headers["user-agent"].to_str().unwrap();
    assert!(agent.starts_with("fleetpulse-agent/"), "{agent}");
}

#[tokio::test]
async fn method_is_used() {
    let (addr, _) = serve().await;
    let post = HttpProbe {
        method: Some("POST".into()),
        ..probe(format!("http://{addr}/method"))
    };
    let outcome = run_http(&post, TIMEOUT).await;
    assert!(outcome.passing, "{}", outcome.message);
    assert_eq!(
        outcome.message,
        format!("POST http://{addr}/method: 204 No Content")
    );
    let get = run_http(&probe(format!("http://{addr}/method")), TIMEOUT).await;
    assert!(!get.passing);
    assert!(
        get.message.contains("405 Method Not Allowed"),
        "{}",
        get.message
    );
}

#[tokio::test]
async fn spec_without_target_is_a_failing_outcome_naming_the_fields() {
    let outcome = run_http(&HttpProbe::default(), TIMEOUT).await;
    assert!(!outcome.passing);
    assert!(
        outcome.message.starts_with("invalid http probe:")
            && outcome.message.contains("`http.url`")
            && outcome.message.contains("`http.service`"),
        "{}",
        outcome.message
    );
}

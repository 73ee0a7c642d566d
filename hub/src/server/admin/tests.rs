use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::routing::get;
use tower::ServiceExt;

use super::*;

fn options(listen: &str, token_file: Option<PathBuf>) -> AdminOptions {
    AdminOptions {
        listen: listen.parse::<SocketAddr>().unwrap(),
        auth: AdminAuth::Auto,
        token_file,
    }
}

async fn answer(app: &Router, authorization: Option<&str>) -> (StatusCode, String, bool) {
    answer_from(app, authorization, None).await
}

/// As [`answer`], for a request the listener received from `peer`.
async fn answer_from(
    app: &Router,
    authorization: Option<&str>,
    peer: Option<&str>,
) -> (StatusCode, String, bool) {
    let mut request = Request::get("/v1/memberclusters");
    if let Some(value) = authorization {
        request = request.header(AUTHORIZATION, value);
    }
    if let Some(peer) = peer {
        request = request.extension(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let challenged = response.headers().contains_key(WWW_AUTHENTICATE);
    let body = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .unwrap();
    (
        status,
        String::from_utf8_lossy(&body).into_owned(),
        challenged,
    )
}

/// A guard on a public address admitting `s3cret-admin-token`, kept in a file under `dir`.
fn token_guard(dir: &std::path::Path) -> Guard {
    let file = dir.join("admin-token");
    std::fs::write(&file, "s3cret-admin-token\n").unwrap();
    Guard::new(&options("0.0.0.0:9443", Some(file)), None).unwrap()
}

fn read_api() -> Router {
    Router::new().route("/v1/memberclusters", get(|| async { "the list" }))
}

#[tokio::test]
async fn a_token_file_admits_exactly_its_token_and_refuses_others_with_401() {
    let dir = tempfile::tempdir().unwrap();
    let guard = token_guard(dir.path());
    let app = protect(read_api(), guard, Default::default());

    let (status, body, challenged) = answer(&app, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(challenged, "a 401 names the Bearer scheme");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["code"], "unauthenticated");
    assert!(body["message"].as_str().unwrap().contains("--token-file"));

    for wrong in [
        "Bearer s3cret-admin-toke",
        "Bearer s3cret-admin-token2",
        "Basic s3cret-admin-token",
    ] {
        let (status, body, _) = answer(&app, Some(wrong)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{wrong}");
        assert!(
            !body.contains("s3cret"),
            "the token is never echoed: {body}"
        );
    }
    let (status, body, _) = answer(&app, Some("Bearer s3cret-admin-token")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "the list"));
    let (status, _, _) = answer(&app, Some("bearer s3cret-admin-token")).await;
    assert_eq!(status, StatusCode::OK, "the scheme is case-insensitive");
}

#[tokio::test]
async fn a_source_past_its_limit_of_401s_is_answered_429_even_with_the_right_token() {
    let dir = tempfile::tempdir().unwrap();
    let guard = token_guard(dir.path());
    let limit = crate::limiter::Limit {
        allowed: 3,
        window: std::time::Duration::from_secs(60),
    };
    let app = protect(read_api(), guard, Arc::new(FailureLimit::new(Some(limit))));
    let (good, wrong) = ("Bearer s3cret-admin-token", "Bearer guess");
    let guesser = Some("10.0.0.7:50000");
    for _ in 0..5 {
        let (status, _, _) = answer_from(&app, Some(good), guesser).await;
        assert_eq!(status, StatusCode::OK, "successes never count");
    }
    for _ in 0..3 {
        let (status, _, _) = answer_from(&app, Some(wrong), guesser).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    for token in [Some(wrong), Some(good), None] {
        let (status, body, _) = answer_from(&app, token, guesser).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{token:?}: {body}");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["code"], "rate_limited");
    }
    let other = Some("10.0.0.8:50000");
    let (status, _, _) = answer_from(&app, Some(good), other).await;
    assert_eq!(status, StatusCode::OK, "another source is not limited");
}

#[tokio::test]
async fn a_loopback_address_without_a_token_file_is_open() {
    let guard = Guard::new(&options("127.0.0.1:9443", None), None).unwrap();
    assert!(matches!(guard, Guard::Open));
    let (status, _, _) = answer(&protect(read_api(), guard, Default::default()), None).await;
    assert_eq!(status, StatusCode::OK);
    let v6 = Guard::new(&options("[::1]:9443", None), None).unwrap();
    assert!(matches!(v6, Guard::Open));
}

#[test]
fn an_embedded_hub_refuses_a_non_loopback_admin_address_without_a_token() {
    let err = Guard::new(&options("0.0.0.0:9443", None), None)
        .err()
        .expect("refused");
    let message = err.to_string();
    assert!(message.contains("0.0.0.0:9443"), "{message}");
    assert!(message.contains("--admin-token-file"), "{message}");
}

#[test]
fn explicit_modes_say_what_they_are_missing() {
    let mut opts = options("127.0.0.1:9443", None);
    opts.auth = AdminAuth::Token;
    let err = Guard::new(&opts, None).err().expect("refused").to_string();
    assert!(err.contains("--admin-token-file"), "{err}");
    opts.auth = AdminAuth::Kubernetes;
    let err = Guard::new(&opts, None).err().expect("refused").to_string();
    assert!(err.contains("--kube"), "{err}");
}

#[test]
fn an_empty_or_missing_token_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "  \n").unwrap();
    for path in [empty, dir.path().join("missing")] {
        let err = Guard::new(&options("0.0.0.0:9443", Some(path.clone())), None)
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
    }
}

#[test]
fn a_changed_token_file_takes_effect_and_an_unusable_change_keeps_the_token_in_effect() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, "first-token\n").unwrap();
    let token = token::Token::read_every(&path, Duration::ZERO).unwrap();
    let admits = |presented: &str| token.check(presented).is_ok();
    assert!(admits("first-token") && !admits("second-token"));

    // Rotated as a mounted Secret is: a new file put in the old one's place.
    let next = dir.path().join("token.next");
    std::fs::write(&next, "second-token\n").unwrap();
    std::fs::rename(&next, &path).unwrap();
    assert!(admits("second-token") && !admits("first-token"));

    // Empty or gone for a moment: the token in effect stays.
    std::fs::write(&path, "").unwrap();
    assert!(admits("second-token"));
    std::fs::remove_file(&path).unwrap();
    assert!(admits("second-token"));
    std::fs::write(&path, "third-token").unwrap();
    assert!(admits("third-token") && !admits("second-token"));
}

#[tokio::test]
async fn the_consoles_page_loads_without_a_token_and_its_data_and_stream_need_one() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Arc::new(crate::testing::fleet_in_memory(Default::default()));
    let console = crate::console::router(fleet, Default::default());
    let app = protect(console, token_guard(dir.path()), Default::default());
    let status_of = |path: &'static str, token: Option<&'static str>| {
        let app = app.clone();
        async move {
            let mut request = Request::get(path);
            if let Some(token) = token {
                request = request.header(AUTHORIZATION, token);
            }
            let request = request.body(Body::empty()).unwrap();
            app.oneshot(request).await.unwrap().status()
        }
    };
    for page in ["/console/", "/console/console.js", "/console/pages.js"] {
        assert_eq!(status_of(page, None).await, StatusCode::OK, "{page}");
    }
    for data in ["/v1/console/events", "/v1/console/clusters/fleet/edge-1"] {
        assert_eq!(
            status_of(data, None).await,
            StatusCode::UNAUTHORIZED,
            "{data}"
        );
        let wrong = Some("Bearer guess");
        assert_eq!(
            status_of(data, wrong).await,
            StatusCode::UNAUTHORIZED,
            "{data}"
        );
    }
    let good = Some("Bearer s3cret-admin-token");
    assert_eq!(status_of("/v1/console/events", good).await, StatusCode::OK);
    let unknown = "/v1/console/clusters/fleet/edge-1";
    assert_eq!(status_of(unknown, good).await, StatusCode::NOT_FOUND);
}

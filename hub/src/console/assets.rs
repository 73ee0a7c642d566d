//! The console's page, script and style, embedded in the binary (no CDN, no build step:
//! plain HTML, CSS and JavaScript written by hand), served with headers that keep them to
//! themselves: a content security policy allowing only this origin (no inline script, no
//! frames), no MIME sniffing, no referrer.

use axum::Router;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderName};
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/console.js");
const PAGES: &str = include_str!("assets/pages.js");
const STYLE: &str = include_str!("assets/console.css");

/// The paths the assets are served on: open to anyone who reaches the listener, since
/// they hold no fleet data.
const PATHS: [&str; 5] = [
    "/console",
    "/console/",
    "/console/console.js",
    "/console/pages.js",
    "/console/console.css",
];

/// Whether `path` is one of the console's assets (served without authentication).
pub fn is_asset(path: &str) -> bool {
    PATHS.contains(&path)
}

const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, content_type),
            (CACHE_CONTROL, "no-cache"),
            (HeaderName::from_static("content-security-policy"), POLICY),
            (HeaderName::from_static("x-content-type-options"), "nosniff"),
            (HeaderName::from_static("referrer-policy"), "no-referrer"),
        ],
        body,
    )
}

/// The assets' routes (also served while the hub stands by, so the console can say so).
pub fn router() -> Router {
    Router::new()
        .route(
            "/console",
            get(|| async { Redirect::permanent("/console/") }),
        )
        .route(
            "/console/",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/console/console.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/console/pages.js",
            get(|| async { asset("text/javascript; charset=utf-8", PAGES) }),
        )
        .route(
            "/console/console.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
}

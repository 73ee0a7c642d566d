//! The console's page, script and style, embedded in the binary (no CDN, no build step:
//! plain HTML, CSS and JavaScript written by hand), served with headers that keep them to
//! themselves: a content security policy allowing only this origin (no inline script, no
//! frames), no MIME sniffing, no referrer.

use axum::Router;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderName};
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;

/// Each asset: its path, its content type and its content.
const ASSETS: [(&str, &str, &str); 4] = [
    (
        "/console/",
        "text/html; charset=utf-8",
        include_str!("assets/index.html"),
    ),
    (
        "/console/console.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/console.js"),
    ),
    (
        "/console/pages.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/pages.js"),
    ),
    (
        "/console/console.css",
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    ),
];

/// Whether `path` is one of the console's assets, or `/console` (which redirects to the
/// page): served without authentication, since they hold no fleet data.
pub fn is_asset(path: &str) -> bool {
    path == "/console" || ASSETS.iter().any(|(p, _, _)| *p == path)
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
    let redirect = get(|| async { Redirect::permanent("/console/") });
    (ASSETS.iter()).fold(
        Router::new().route("/console", redirect),
        |router, &(path, content_type, body)| {
            router.route(path, get(move || async move { asset(content_type, body) }))
        },
    )
}

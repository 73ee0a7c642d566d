//! The admin listener: the read API and `/metrics` on their own address
//! (`--admin-listen`), apart from the port agents reach, with the same TLS and client
//! limits as the agents' listener, and authentication where the address is not loopback:
//! a bearer token from a file (`--admin-token-file`, compared in constant time), or in
//! Kubernetes mode the caller's own Kubernetes token, authenticated with a TokenReview and
//! authorized with a SubjectAccessReview (verb `get` on the request's path as a
//! non-resource URL), as kube-rbac-proxy does. A loopback address without a token file is
//! open: only processes on the same host (or in the same Pod) reach it. A request answered
//! 401 counts against its source's limit of authentication failures
//! ([`crate::limiter::failures`]), shared with the agents' listener; a source over it is
//! answered 429 before its token is looked at. The console's page, script and style
//! ([`crate::console`]) are the one exception: they carry no fleet data and load without a
//! token, so that the page can ask for one; all the data they show needs it.

mod kubernetes;
mod token;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Request};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use fleetpulse_common::protocol::errors::RejectCode;

use crate::limiter::failures::{FailureLimit, Source};
use crate::refusal::Refusal;

/// How the admin listener authenticates its callers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AdminAuth {
    /// A token file when `--admin-token-file` is given; else, in Kubernetes mode on an
    /// address that is not loopback, TokenReview and SubjectAccessReview; else open on a
    /// loopback address (and a non-loopback embedded hub refuses to start).
    #[default]
    Auto,
    /// The bearer token in `--admin-token-file`.
    Token,
    /// TokenReview and SubjectAccessReview against the management cluster (`--kube`),
    /// also on a loopback address.
    Kubernetes,
}

/// Where the read API and `/metrics` are served, and who may read them.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct AdminOptions {
    /// Address of the admin listener: the read API (`fleetpulse-hub get`, `describe`) and
    /// `/metrics`. Loopback by default, so only this host reads it; on any other address
    /// callers must authenticate (see --admin-auth). Never expose it where agents connect.
    #[arg(
        id = "admin_listen",
        long = "admin-listen",
        value_name = "ADDR",
        env = "FLEETPULSE_ADMIN_LISTEN",
        default_value = "127.0.0.1:9443"
    )]
    pub listen: SocketAddr,
    /// How admin callers authenticate: `auto` (a token file when given; else Kubernetes
    /// TokenReview with --kube on a non-loopback address; else open on loopback), `token`
    /// or `kubernetes`.
    #[arg(
        id = "admin_auth",
        long = "admin-auth",
        value_name = "MODE",
        env = "FLEETPULSE_ADMIN_AUTH",
        value_enum,
        default_value_t = AdminAuth::Auto
    )]
    pub auth: AdminAuth,
    /// File holding the bearer token admin callers must send (`Authorization: Bearer
    /// TOKEN`); surrounding whitespace is ignored. Read once at start.
    #[arg(
        id = "admin_token_file",
        long = "admin-token-file",
        value_name = "FILE",
        env = "FLEETPULSE_ADMIN_TOKEN_FILE"
    )]
    pub token_file: Option<PathBuf>,
}

impl AdminOptions {
    /// Loopback on a free port, open, as tests and embedding want (`serve` defaults to
    /// `127.0.0.1:9443`).
    pub fn loopback() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            auth: AdminAuth::Auto,
            token_file: None,
        }
    }
}

/// The admin listener's authentication could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// A non-loopback address with nothing to authenticate callers by.
    #[error(
        "--admin-listen {addr} is not a loopback address, so the read API and /metrics would \
         be open to anyone who reaches it: pass --admin-token-file FILE (or run with --kube, \
         which authenticates callers with TokenReview), or listen on 127.0.0.1"
    )]
    Unprotected {
        /// The address.
        addr: SocketAddr,
    },
    /// `--admin-auth token` without a token file.
    #[error("--admin-auth token needs --admin-token-file FILE")]
    NoTokenFile,
    /// `--admin-auth kubernetes` without Kubernetes mode.
    #[error("--admin-auth kubernetes needs --kube (TokenReview runs on the management cluster)")]
    NoKube,
    /// The token file is unreadable or empty.
    #[error(transparent)]
    Token(#[from] token::TokenError),
}

/// Who may read the admin listener.
pub(super) enum Guard {
    /// Anyone who reaches the address (loopback only).
    Open,
    /// Callers presenting the configured token.
    Token(token::Token),
    /// Callers whose Kubernetes token and RBAC allow the path.
    Kubernetes(kubernetes::Reviewer),
}

impl Guard {
    /// The guard `opts` ask for, in Kubernetes mode when `kube` is set.
    pub(super) fn new(
        opts: &AdminOptions,
        kube: Option<&kube::Client>,
    ) -> Result<Guard, AdminError> {
        let loopback = opts.listen.ip().is_loopback();
        match (opts.auth, &opts.token_file, kube) {
            (AdminAuth::Token | AdminAuth::Auto, Some(path), _) => {
                Ok(Guard::Token(token::Token::read(path)?))
            }
            (AdminAuth::Token, None, _) => Err(AdminError::NoTokenFile),
            (AdminAuth::Kubernetes, _, None) => Err(AdminError::NoKube),
            (AdminAuth::Kubernetes, _, Some(client)) => {
                Ok(Guard::Kubernetes(kubernetes::Reviewer::new(client.clone())))
            }
            (AdminAuth::Auto, None, Some(client)) if !loopback => {
                Ok(Guard::Kubernetes(kubernetes::Reviewer::new(client.clone())))
            }
            (AdminAuth::Auto, None, _) if loopback => Ok(Guard::Open),
            (AdminAuth::Auto, None, _) => Err(AdminError::Unprotected { addr: opts.listen }),
        }
    }

    /// How the guard authenticates, for the log line.
    pub(super) fn describe(&self) -> &'static str {
        match self {
            Guard::Open => "none (loopback)",
            Guard::Token(_) => "bearer token file",
            Guard::Kubernetes(_) => "Kubernetes TokenReview and SubjectAccessReview",
        }
    }

    async fn verdict(&self, token: Option<&str>, path: &str) -> Result<(), Refusal> {
        match (self, token) {
            (Guard::Open, _) => Ok(()),
            (_, None) => Err(Refusal::new(
                RejectCode::Unauthenticated,
                "the admin API needs a bearer token: send `Authorization: Bearer TOKEN` \
                 (fleetpulse-hub get --token-file FILE)",
            )),
            (Guard::Token(expected), Some(token)) => expected.check(token),
            (Guard::Kubernetes(reviewer), Some(token)) => reviewer.review(token, path).await,
        }
    }
}

/// Wraps `app` so that every request passes `guard` first: 429 while its source is over
/// its limit of authentication `failures`, 401 without a valid token (counted against the
/// source), 403 when the token's user may not read the path, 503 when the review itself
/// failed.
pub(super) fn protect(app: Router, guard: Guard, failures: Arc<FailureLimit>) -> Router {
    if matches!(guard, Guard::Open) {
        return app;
    }
    let guard = Arc::new(guard);
    app.layer(axum::middleware::from_fn(
        move |request: Request, next: Next| {
            let (guard, failures) = (guard.clone(), failures.clone());
            async move {
                // The console's page, script and style hold no fleet data: the login page
                // must load before a token is entered.
                if crate::console::is_asset(request.uri().path()) {
                    return next.run(request).await;
                }
                let source = Source::of_peer(request.extensions().get::<ConnectInfo<SocketAddr>>());
                if let Err(limited) = failures.check(source) {
                    return limited.into_response();
                }
                let token = bearer(&request);
                match guard.verdict(token.as_deref(), request.uri().path()).await {
                    Ok(()) => next.run(request).await,
                    Err(refusal) => {
                        failures.refused(source, refusal.0.code);
                        refused(refusal)
                    }
                }
            }
        },
    ))
}

/// The token of an `Authorization: Bearer TOKEN` header.
fn bearer(request: &Request) -> Option<String> {
    let value = request.headers().get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

fn refused(refusal: Refusal) -> Response {
    let unauthenticated = refusal.0.code == RejectCode::Unauthenticated;
    let mut response = refusal.into_response();
    if unauthenticated {
        response.headers_mut().insert(
            WWW_AUTHENTICATE,
            axum::http::HeaderValue::from_static("Bearer realm=\"fleetpulse-hub\""),
        );
    }
    response
}

#[cfg(test)]
mod tests;

//! The listener: accepts connections up to [`ConnectionLimits::max_connections`], runs the
//! TLS handshake with a deadline, and serves each connection with the router (header,
//! body and idle timeouts, HTTP/2 stream and reset limits) until shutdown, then drains
//! open connections. An accept error (e.g. `EMFILE`: out of file descriptors) backs off
//! instead of spinning, and is logged at most once a second. Both listeners (the agents'
//! and the admin one) are bound and switched from the standby router to the hub's here.

mod accept;
mod coalesce;
mod connection;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use futures::FutureExt;
use futures::future::{BoxFuture, Either};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use tower::util::Oneshot;

use fleetpulse_common::protocol::report::ClusterId;

use crate::ingest::AppState;
use crate::ingest::agent;
use crate::ingest::routes::{Endpoint, agent_endpoint};
use crate::kubernetes::shard_leases::Shards;

use super::limits::ConnectionLimits;

pub(super) async fn serve(
    listener: TcpListener,
    app: impl connection::App,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let graceful = GracefulShutdown::new();
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let builder = connection::builder(&limits);
    let mut errors = accept::Backoff::default();
    let mut full = accept::Refusals::default();
    loop {
        let (stream, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => {
                    errors.reset();
                    conn
                }
                Err(e) => {
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = errors.wait(&e) => continue,
                    }
                }
            },
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            full.refused(limits.max_connections);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        // The peer's address, for the limits per source (enrolment refusals, and
        // authentication failures on both listeners).
        let app = connection::Served::new(app.clone(), peer, limits.body_read_timeout_seconds);
        let watcher = graceful.watcher();
        let (tls, builder) = (tls.clone(), builder.clone());
        let (handshake, idle) = (
            limits.tls_handshake_timeout_seconds,
            limits.idle_timeout_seconds,
        );
        tokio::spawn(async move {
            match tls {
                None => connection::serve(stream, app, builder, watcher, idle).await,
                Some(acceptor) => {
                    match tokio::time::timeout(handshake, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            connection::serve(stream, app, builder, watcher, idle).await
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(Duration::from_secs(5), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after 5s; closing them");
    }
}

/// A listener bound to `addr`, and the address it got (port 0 resolved).
pub(super) async fn bound(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), super::HubError> {
    let listen = |source| super::HubError::Listen { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(listen)?;
    let bound = listener.local_addr().map_err(listen)?;
    Ok((listener, bound))
}

/// The agent endpoints as the agents' listener serves them, in front of the router: a
/// request for one goes straight to its handler (through the shard gate when replicas
/// share the fleet), every other request to the router. A pass through the router costs
/// its path matching, a clone of the boxed route and its layers' boxed futures; the
/// router's routes never match these paths (they fall to [`agent::dispatch`], which serves
/// them the same way), so the answer is the same.
#[derive(Clone)]
pub(super) struct Direct {
    state: AppState,
    shards: Option<Shards>,
}

impl Direct {
    /// The endpoints of `state`'s fleet, gated by `shards` when replicas share it.
    pub(super) fn new(state: AppState, shards: Option<Shards>) -> Self {
        Self { state, shards }
    }

    /// The answer to `request`, for `endpoint` of `cluster` (its path, as
    /// [`agent_endpoint`] read it, which the shard gate takes rather than reading the
    /// path again).
    fn serve(
        &self,
        cluster: ClusterId,
        endpoint: Endpoint,
        request: Request,
    ) -> BoxFuture<'static, Response> {
        if let Some(answer) = self
            .shards
            .as_ref()
            .and_then(|shards| super::shard_gate::elsewhere(shards, &cluster, &request))
        {
            return Box::pin(std::future::ready(answer));
        }
        let state = self.state.clone();
        Box::pin(async move { agent::serve(&state, cluster, endpoint, request).await })
    }
}

/// What a listener serves, switched as the replica's role changes (standby, loading, then
/// serving): the router, and once the hub serves agents, their endpoints in front of it.
#[derive(Clone)]
pub(super) struct Routed {
    router: Router,
    agents: Option<Direct>,
}

impl Routed {
    /// `router`, with the agent endpoints of `agents` served in front of it.
    pub(super) fn with_agents(router: Router, agents: Direct) -> Self {
        Self {
            router,
            agents: Some(agents),
        }
    }
}

impl From<Router> for Routed {
    /// Every request to `router`.
    fn from(router: Router) -> Self {
        Self {
            router,
            agents: None,
        }
    }
}

/// Routes each request to what `routed` holds now.
#[derive(Clone)]
pub(super) struct Switch(watch::Receiver<Routed>);

impl Switch {
    pub(super) fn new(routed: watch::Receiver<Routed>) -> Self {
        Self(routed)
    }

    /// The switch as a router, for layers that wrap a router.
    pub(super) fn into_router(self) -> Router {
        Router::new().fallback_service(self)
    }
}

impl tower::Service<Request> for Switch {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<
        futures::future::Map<
            BoxFuture<'static, Response>,
            fn(Response) -> Result<Response, Infallible>,
        >,
        Oneshot<Router, Request>,
    >;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let routed = self.0.borrow();
        if let Some(agents) = &routed.agents
            && let Some((cluster, endpoint)) = agent_endpoint(request.uri().path())
        {
            return Either::Left(agents.serve(cluster, endpoint, request).map(Ok));
        }
        Either::Right(routed.router.clone().oneshot(request))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::StatusCode;
    use fleetpulse_common::protocol::replay::Freshness;

    use super::*;
    use crate::admission::Admission;
    use crate::fleet::Settings;
    use crate::limiter::failures::FailureLimit;
    use crate::metrics::BatchCounters;
    use crate::testing;

    fn agents() -> Direct {
        let state = AppState {
            fleet: Arc::new(testing::fleet_in_memory(Settings::default())),
            admission: Arc::new(Admission::new(
                "fleetpulse".into(),
                Freshness::default(),
                None,
                BatchCounters::default(),
            )),
            failures: Arc::new(FailureLimit::new(None)),
        };
        Direct::new(state, None)
    }

    async fn status(switch: &mut Switch, method: &str, path: &str) -> StatusCode {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .unwrap();
        tower::Service::call(switch, request)
            .await
            .unwrap()
            .status()
    }

    /// With agents, their endpoints are answered in front of the router (which answers
    /// everything 418 here) and every other path reaches it; without, everything does.
    #[tokio::test]
    async fn the_agent_endpoints_are_answered_in_front_of_the_router_once_agents_are_served() {
        let teapot = Router::new().fallback(|| async { StatusCode::IM_A_TEAPOT });
        let heartbeat = "/v1/clusters/fleet/edge-1/heartbeat";
        let (routed, receiver) = watch::channel(Routed::from(teapot.clone()));
        let mut switch = Switch::new(receiver);
        assert_eq!(
            status(&mut switch, "GET", heartbeat).await,
            StatusCode::IM_A_TEAPOT
        );

        routed.send_modify(|r| *r = Routed::with_agents(teapot, agents()));
        assert_eq!(
            status(&mut switch, "GET", heartbeat).await,
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            status(&mut switch, "GET", "/v1/clusters/fleet/edge-1/config").await,
            StatusCode::BAD_REQUEST,
            "a config pull without its Authorization header is refused malformed_jws"
        );
        for other in ["/healthz", "/v1/clusters/fleet/edge-1/status"] {
            assert_eq!(
                status(&mut switch, "GET", other).await,
                StatusCode::IM_A_TEAPOT,
                "{other}"
            );
        }
    }
}

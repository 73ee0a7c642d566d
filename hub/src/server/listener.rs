//! The listener: accepts connections up to [`ConnectionLimits::max_connections`], runs the
//! TLS handshake with a deadline, and serves each connection with the router (header,
//! body and idle timeouts, HTTP/2 stream and reset limits) until shutdown, then drains
//! open connections. An accept error (e.g. `EMFILE`: out of file descriptors) backs off
//! instead of spinning, and is logged at most once a second. Both listeners (the agents'
//! and the admin one) are bound and switched from the standby router to the hub's here.

mod accept;
mod coalesce;
mod connection;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::limits::ConnectionLimits;

pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let graceful = GracefulShutdown::new();
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let app = connection::body_deadline(app, limits.body_read_timeout_seconds);
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
        let app = app
            .clone()
            .layer(axum::Extension(axum::extract::ConnectInfo(peer)));
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

/// Routes each request to the router currently in `routed` (standby, then the hub's).
pub(super) fn switch(routed: tokio::sync::watch::Receiver<Router>) -> Router {
    use tower::ServiceExt;
    Router::new().fallback_service(tower::service_fn(move |request: axum::extract::Request| {
        let router = routed.borrow().clone();
        async move { router.oneshot(request).await }
    }))
}

//! One connection: hyper's HTTP/1.1 and HTTP/2 server with the limits applied, the body
//! deadline on every request, and an idle timer that closes a connection carrying no
//! bytes for the idle timeout.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request};
use axum::response::Response;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::Watcher;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;
use tower::ServiceExt;
use tower::util::Oneshot;

use super::coalesce::Coalesced;
use crate::server::limits::ConnectionLimits;

/// The HTTP server of every connection, limits applied.
pub(super) fn builder(limits: &ConnectionLimits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout_seconds);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.http2_max_concurrent_streams)
        .max_pending_accept_reset_streams(limits.http2_max_pending_resets);
    builder
}

/// Serves `stream` until it ends, shutdown drains it, or it stays idle for `idle`.
pub(super) async fn serve<S, A>(
    stream: S,
    service: Served<A>,
    builder: Builder<TokioExecutor>,
    watcher: Watcher,
    idle: Duration,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    A: App,
{
    let activity = Activity::new();
    let io = TokioIo::new(Tracked {
        inner: stream,
        activity: activity.clone(),
    });
    let conn = builder.serve_connection(io, service);
    let mut conn = Coalesced::new(watcher.watch(conn.into_owned()));
    loop {
        tokio::select! {
            ended = &mut conn => {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = tokio::time::sleep_until(activity.last() + idle) => {
                if activity.last() + idle <= Instant::now() {
                    tracing::debug!(idle_s = idle.as_secs_f64(), "closing an idle connection");
                    return;
                }
            }
        }
    }
}

/// When a connection last carried bytes.
#[derive(Clone)]
struct Activity {
    start: Instant,
    last_ms: Arc<AtomicU64>,
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// A stream that records its reads and writes in an [`Activity`].
struct Tracked<S> {
    inner: S,
    activity: Activity,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// What a listener serves: the router (or the switch in front of the current router).
pub(in crate::server) trait App:
    tower::Service<Request, Response = Response, Error = Infallible, Future: Send>
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<A> App for A where
    A: tower::Service<Request, Response = Response, Error = Infallible, Future: Send>
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// A connection's service: every request gets the peer's address (`ConnectInfo`, for the
/// limits per source) and its body the deadline, then goes to `app`. Done here, once per
/// request, rather than as router layers, which would wrap every route and cost a pass
/// through a router of their own.
#[derive(Clone)]
pub(super) struct Served<A> {
    app: A,
    peer: SocketAddr,
    body_limit: Duration,
}

impl<A> Served<A> {
    /// `app` for a connection from `peer`, with bodies due within `body_limit` of their
    /// headers.
    pub(super) fn new(app: A, peer: SocketAddr, body_limit: Duration) -> Self {
        Self {
            app,
            peer,
            body_limit,
        }
    }
}

impl<A: App> hyper::service::Service<hyper::Request<Incoming>> for Served<A> {
    type Response = Response;
    type Error = Infallible;
    type Future = Oneshot<A, Request>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let limit = self.body_limit;
        let deadline = Instant::now() + limit;
        let mut request = request.map(|body| {
            Body::new(Deadline {
                inner: body,
                deadline,
                sleep: None,
                limit,
            })
        });
        request.extensions_mut().insert(ConnectInfo(self.peer));
        self.app.clone().oneshot(request)
    }
}

/// Every request's body must arrive within `limit` of its headers; after that, reading it
/// fails (the handler refuses the request) and the connection is not reused. The timer is
/// armed only when the body is not all there when first read (a heartbeat's usually is: it
/// arrives with its headers), so most requests cost no timer.
struct Deadline {
    inner: Incoming,
    deadline: Instant,
    /// Armed at the first read that has to wait.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    limit: Duration,
}

/// The body did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request body did not arrive within {0:?} of its headers (--body-read-timeout-seconds)"
)]
struct BodyTimedOut(Duration);

impl hyper::body::Body for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(axum::Error::new)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut(this.limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

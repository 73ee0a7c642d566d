//! `/readyz` of a serving embedded hub: 503 with the reason while its store cannot be
//! written, so a Service stops sending it agents whose state it would not keep, and an
//! operator sees why; 200 again once the writes catch up.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::future::{Either, Ready, ready};
use tower::Service;

use crate::store::StoreWriter;

/// `app` with `/readyz` answering 503 while `store` has a write problem. A plain service
/// around each route, not a middleware: the other requests (every heartbeat) pass through
/// it with one comparison of the path, no boxed future.
pub(super) fn gate(app: Router, store: StoreWriter) -> Router {
    app.layer(tower::layer::layer_fn(move |inner| Gate {
        inner,
        store: store.clone(),
    }))
}

/// The service [`gate`] puts around each route.
#[derive(Clone)]
struct Gate<S> {
    inner: S,
    store: StoreWriter,
}

impl<S> Service<Request> for Gate<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let problem = (request.uri().path() == "/readyz")
            .then(|| self.store.problem())
            .flatten();
        match problem {
            Some(problem) => Either::Left(ready(Ok(not_ready(&problem)))),
            None => Either::Right(self.inner.call(request)),
        }
    }
}

fn not_ready(problem: &str) -> Response {
    let why = format!(
        "not ready: the embedded store cannot be written ({problem}); the writes are retried: \
         check that --data is writable and its disk has space"
    );
    (StatusCode::SERVICE_UNAVAILABLE, why).into_response()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;
    use crate::store::{RetrySettings, Snapshot, Store, StoreError, StoredCluster, Write};

    /// A store whose writes fail while `down`.
    #[derive(Clone, Default)]
    struct Disk {
        down: Arc<AtomicBool>,
    }

    impl Store for Disk {
        fn load(&mut self) -> Result<Snapshot, StoreError> {
            Ok(Snapshot::default())
        }

        fn apply(&mut self, _: &[Write]) -> Result<(), StoreError> {
            if self.down.load(Ordering::SeqCst) {
                return Err(StoreError::Checkpoint {
                    path: "/data/fleetpulse.db".into(),
                    problem: "read-only file system".into(),
                });
            }
            Ok(())
        }
    }

    async fn readyz(app: &Router) -> (StatusCode, String) {
        let request = Request::get("/readyz")
            .body(axum::body::Body::empty())
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    async fn until(app: &Router, status: StatusCode) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (now, body) = readyz(app).await;
            if now == status {
                return body;
            }
            assert!(Instant::now() < deadline, "/readyz stayed {now}: {body}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn readyz_fails_saying_why_while_the_store_cannot_be_written_and_recovers() {
        let disk = Disk::default();
        let retry = RetrySettings {
            first: Duration::from_millis(10),
            max: Duration::from_millis(40),
        };
        let store = StoreWriter::spawn_with(disk.clone(), retry);
        let app = gate(
            Router::new().route("/readyz", get(|| async { "ok" })),
            store.clone(),
        );
        assert_eq!(readyz(&app).await, (StatusCode::OK, "ok".into()));

        disk.down.store(true, Ordering::SeqCst);
        store.send(vec![Write::Cluster {
            cluster: fleetpulse_common::protocol::report::ClusterId::new("fleet", "a"),
            record: StoredCluster::default(),
        }]);
        let why = until(&app, StatusCode::SERVICE_UNAVAILABLE).await;
        assert!(why.contains("read-only file system"), "{why}");
        assert!(why.contains("/data/fleetpulse.db"), "{why}");

        disk.down.store(false, Ordering::SeqCst);
        assert_eq!(until(&app, StatusCode::OK).await, "ok");
    }
}

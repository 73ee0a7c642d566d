//! Watch streams: newline-delimited JSON `WatchEvent`s from a resourceVersion, with replay
//! from the bounded history, 410 Gone for compacted versions, bookmarks, `sendInitialEvents`
//! and `timeoutSeconds`.

use crate::{
    error::ApiError,
    events::to_view,
    handlers::selectors,
    resources::ResourceDef,
    selector::{FieldSelector, LabelSelector},
    server::{Shared, Target},
    store::WatchRecord,
};
use axum::{
    body::{Body, Bytes},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::{
    collections::HashMap, collections::VecDeque, convert::Infallible, sync::Arc, time::Duration,
};
use tokio::{sync::broadcast, time::Instant};

/// Server-side cap when the client sends no `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

struct Filter {
    def: ResourceDef,
    key: String,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    /// The watch line for `rec` (its object as this API shows it), if the watch wants it.
    fn line(&self, rec: &WatchRecord) -> Option<Bytes> {
        if rec.key != self.key || self.namespace.as_ref().is_some_and(|n| *n != rec.namespace) {
            return None;
        }
        let converted;
        let object = if self.def.is_events_v1() {
            converted = to_view(&self.def, rec.object.clone());
            &converted
        } else {
            &rec.object
        };
        (self.labels.matches(object) && self.fields.matches(object))
            .then(|| line(rec.event.as_str(), object))
    }
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut buf = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    buf.push(b'\n');
    Bytes::from(buf)
}

fn bookmark(kind: &str, api_version: &str, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": kind, "apiVersion": api_version, "metadata": meta});
    line("BOOKMARK", &obj)
}

struct Stream {
    pending: VecDeque<Bytes>,
    rx: broadcast::Receiver<Arc<WatchRecord>>,
    close: tokio::sync::watch::Receiver<u64>,
    filter: Filter,
    last_rv: u64,
    deadline: Instant,
    /// `(kind, apiVersion)` for the closing bookmark when the client allows bookmarks.
    bookmark: Option<(String, String)>,
    done: bool,
    _open: OpenWatch,
}

/// Counts a stream in [`Shared::open_watches`] while it lives.
struct OpenWatch(Arc<AtomicUsize>);

impl OpenWatch {
    fn new(shared: &Shared) -> Self {
        shared.open_watches.fetch_add(1, Ordering::Relaxed);
        OpenWatch(shared.open_watches.clone())
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn stream_response(s: Stream) -> Response {
    let body = futures::stream::unfold(s, |mut s| async move {
        loop {
            if let Some(b) = s.pending.pop_front() {
                return Some((Ok::<_, Infallible>(b), s));
            }
            if s.done {
                return None;
            }
            tokio::select! {
                () = tokio::time::sleep_until(s.deadline) => {
                    s.done = true;
                    if let Some((kind, api_version)) = s.bookmark.take() {
                        s.pending.push_back(bookmark(&kind, &api_version, s.last_rv, false));
                    }
                }
                _ = s.close.changed() => s.done = true,
                r = s.rx.recv() => match r {
                    Ok(rec) if rec.rv > s.last_rv => {
                        if let Some(l) = s.filter.line(&rec) {
                            s.last_rv = rec.rv;
                            s.pending.push_back(l);
                        }
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        s.pending.push_back(line("ERROR", &ApiError::gone(s.last_rv).status()));
                        s.done = true;
                    }
                    Err(broadcast::error::RecvError::Closed) => s.done = true,
                },
            }
        }
    });
    (
        StatusCode::OK,
        [(http::header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response()
}

/// `GET ...?watch=true`.
pub fn watch(shared: &Arc<Shared>, t: &Target, params: &HashMap<String, String>) -> Response {
    let (labels, fields) = match selectors(params) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let flag = |k: &str| params.get(k).is_some_and(|v| v == "true" || v == "1");
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|s| s.parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let from_rv = match params.get("resourceVersion").filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => match s.parse::<u64>() {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(_) => {
                return ApiError::bad_request(format!("invalid resourceVersion {s:?}"))
                    .into_response();
            }
        },
    };
    let filter = Filter {
        def: t.def.clone(),
        key: t.def.storage_key(),
        namespace: t.namespace.clone(),
        labels,
        fields,
    };
    let close = shared.close_watches.subscribe();
    let store = shared.store.lock();
    let mut pending = VecDeque::new();
    let rx = match from_rv.filter(|_| !flag("sendInitialEvents")) {
        Some(rv) => match store.watch_from(rv) {
            Some((replay, rx)) => {
                pending.extend(replay.iter().filter_map(|r| filter.line(r)));
                rx
            }
            None => {
                let err = line("ERROR", &ApiError::gone(rv).status());
                let (_, rx) = broadcast::channel(1);
                return stream_response(Stream {
                    pending: VecDeque::from([err]),
                    rx,
                    close,
                    filter,
                    last_rv: rv,
                    deadline: Instant::now(),
                    bookmark: None,
                    done: true,
                    _open: OpenWatch::new(shared),
                });
            }
        },
        None => {
            for obj in store.list(&t.def, t.namespace.as_deref()) {
                let obj = to_view(&t.def, obj);
                if filter.labels.matches(&obj) && filter.fields.matches(&obj) {
                    pending.push_back(line("ADDED", &obj));
                }
            }
            if flag("sendInitialEvents") && flag("allowWatchBookmarks") {
                let (kind, av) = (&t.def.kind, t.def.api_version());
                pending.push_back(bookmark(kind, &av, store.current_rv(), true));
            }
            store.subscribe()
        }
    };
    let last_rv = store.current_rv();
    drop(store);
    stream_response(Stream {
        pending,
        rx,
        close,
        filter,
        last_rv,
        deadline: Instant::now() + timeout,
        bookmark: flag("allowWatchBookmarks").then(|| (t.def.kind.clone(), t.def.api_version())),
        done: false,
        _open: OpenWatch::new(shared),
    })
}

//! The axum router: discovery routes plus one dispatcher that parses every resource path
//! (`/api/v1/...`, `/apis/{group}/{version}/...`, cluster-scoped and namespaced), records the
//! request and hands it to the matching handler; OpenAPI v3 for `kubectl explain`.

use crate::{
    discovery,
    error::ApiError,
    handlers, kubelet, openapi,
    resources::ResourceDef,
    store::{RequestRecord, Store},
    watch,
};
use axum::{
    Router,
    body::Bytes,
    extract::{Query, State},
    http::{HeaderMap, Method, Uri},
    response::{IntoResponse, Response},
    routing::get,
};
use futures::StreamExt;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::{collections::HashMap, sync::Arc};

/// State shared by the router, the simulated kubelet and the [`crate::KubeSim`] handle.
#[derive(Debug)]
pub struct Shared {
    /// All objects and ledgers.
    pub store: Mutex<Store>,
    /// Bumped to end every open watch stream (see [`crate::KubeSim::close_watches`]).
    pub close_watches: tokio::sync::watch::Sender<u64>,
    /// Watch streams open now (see [`crate::KubeSim::open_watches`]).
    pub open_watches: Arc<AtomicUsize>,
    /// Bytes of response bodies served to resource requests (see
    /// [`crate::KubeSim::served_bytes`]).
    pub served_bytes: Arc<AtomicU64>,
    /// Pod outcome rules of the simulated kubelet.
    pub kubelet: Mutex<kubelet::Rules>,
    /// Tokens and rules TokenReview and SubjectAccessReview answer from.
    pub reviews: Mutex<crate::reviews::Reviews>,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            store: Mutex::new(Store::default()),
            close_watches: tokio::sync::watch::channel(0).0,
            open_watches: Arc::default(),
            served_bytes: Arc::default(),
            kubelet: Mutex::new(kubelet::Rules::default()),
            reviews: Mutex::new(crate::reviews::Reviews::default()),
        }
    }
}

/// Builds the API server router over shared state.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/version", get(discovery::version))
        .route("/readyz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/healthz", get(|| async { "ok" }))
        .route("/api", get(discovery::core_versions))
        .route("/api/v1", get(discovery::core_resources))
        .route("/apis", get(discovery::groups))
        .route("/apis/{group}/{version}", get(discovery::group_resources))
        .route("/openapi/v3", get(openapi::index))
        .route("/openapi/v3/api/{version}", get(openapi::core))
        .route("/openapi/v3/apis/{group}/{version}", get(openapi::group))
        .fallback(dispatch)
        .with_state(shared)
}

/// A parsed resource path.
#[derive(Debug, Clone)]
pub struct Target {
    /// The resource type addressed.
    pub def: ResourceDef,
    /// Namespace from the path (`/namespaces/{ns}/...`), if any.
    pub namespace: Option<String>,
    /// Object name, if the path addresses one object.
    pub name: Option<String>,
    /// Subresource (`status`, `log`), if any.
    pub sub: Option<String>,
}

/// Resolves a request path against the served resources.
pub fn parse_target(store: &Store, path: &str) -> Result<Target, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return Err(ApiError::no_route(path)),
    };
    let namespaced_path = matches!(rest, ["namespaces", _, plural, ..]
        if store.registry.find(group, version, plural).is_some_and(|d| d.namespaced));
    let (namespace, rest) = if namespaced_path {
        (Some(rest[1].to_owned()), &rest[2..])
    } else {
        (None, rest)
    };
    let def = store
        .registry
        .find(group, version, rest[0])
        .cloned()
        .ok_or_else(|| ApiError::no_route(path))?;
    if rest.len() > 3 {
        return Err(ApiError::no_route(path));
    }
    let sub = rest.get(2).map(|s| (*s).to_owned());
    let sub_ok = match sub.as_deref() {
        None => true,
        Some("status") => def.status_subresource,
        Some("log") => def.group.is_empty() && def.plural == "pods",
        Some(_) => false,
    };
    if !sub_ok {
        return Err(ApiError::no_route(path));
    }
    Ok(Target {
        def,
        namespace,
        name: rest.get(1).map(|s| (*s).to_owned()),
        sub,
    })
}

/// The RBAC verb for a request.
fn verb(method: &Method, target: &Target, params: &HashMap<String, String>) -> &'static str {
    let watching = params.get("watch").is_some_and(|w| w == "true" || w == "1");
    match (method.as_str(), target.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if watching => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

/// Serves a resource request ([`serve`]), counting the bytes of its response body as they
/// are sent (a watch's as its events flow).
async fn dispatch(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let served = shared.served_bytes.clone();
    let (parts, body) = serve(shared, method, uri, headers, body).await.into_parts();
    let counted = body.into_data_stream().inspect(move |chunk| {
        if let Ok(bytes) = chunk {
            served.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        }
    });
    Response::from_parts(parts, axum::body::Body::from_stream(counted))
}

async fn serve(
    shared: Arc<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let params: HashMap<String, String> = Query::try_from_uri(&uri)
        .map(|Query(q)| q)
        .unwrap_or_default();
    let target = {
        let mut store = shared.store.lock();
        let target = match parse_target(&store, uri.path()) {
            Ok(t) => t,
            Err(e) => return e.into_response(),
        };
        let verb = verb(&method, &target, &params);
        let resource = match &target.sub {
            Some(s) => format!("{}/{s}", target.def.plural),
            None => target.def.plural.clone(),
        };
        // A review is answered, never stored: it is a request, not a write.
        let review = crate::reviews::review_kind(&target.def).is_some();
        if !review
            && matches!(
                verb,
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
        {
            *store
                .writes
                .entry((resource.clone(), verb.to_owned()))
                .or_default() += 1;
        }
        if store.refused.contains(&(resource.clone(), verb.to_owned())) {
            let message = format!("kubesim refuses {verb} on {resource} (a simulated outage)");
            return ApiError::internal(message).into_response();
        }
        if let Some(i) = store
            .interleaved
            .iter()
            .position(|(r, v, _)| *r == resource && v == verb)
        {
            let (_, _, patch) = store.interleaved.remove(i);
            handlers::interleave(&mut store, &target, &patch);
        }
        store.requests.push(RequestRecord {
            verb: verb.to_owned(),
            group: target.def.group.clone(),
            resource: target.def.plural.clone(),
            namespace: target.namespace.clone(),
            subresource: target.sub.clone(),
            name: target.name.clone(),
        });
        target
    };
    let watching = params.get("watch").is_some_and(|w| w == "true" || w == "1");
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if content_type.starts_with("application/vnd.kubernetes.protobuf") {
        return ApiError::unsupported_media(
            "application/vnd.kubernetes.protobuf (kubesim reads JSON and YAML bodies only;              kubectl sends protobuf for built-in kinds in `kubectl create <kind>`: use              `kubectl apply -f` instead)",
        )
        .into_response();
    }
    let writer = crate::managed_fields::Writer {
        manager: params
            .get("fieldManager")
            .cloned()
            .or_else(|| {
                let agent = headers.get(http::header::USER_AGENT)?.to_str().ok()?;
                Some(agent.split('/').next().unwrap_or(agent).to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned()),
        force: params.get("force").is_some_and(|f| f == "true"),
    };
    let as_table = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(crate::table::wants_table);
    if let Some(kind) = crate::reviews::review_kind(&target.def) {
        return review(&shared, kind, &method, &body);
    }
    let result = match (method.as_str(), target.name.is_some()) {
        ("GET", false) if watching => return watch::watch(&shared, &target, &params),
        ("GET", false) => handlers::list(&shared, &target, &params, as_table),
        ("GET", true) if target.sub.as_deref() == Some("log") => {
            return handlers::log(&shared, &target, &params);
        }
        ("GET", true) => handlers::get(&shared, &target, &params, as_table),
        ("POST", false) => handlers::create(&shared, &target, &body, &writer),
        ("PUT", true) => handlers::replace(&shared, &target, &body, &writer),
        ("PATCH", true) => handlers::patch(&shared, &target, content_type, &body, &writer),
        ("DELETE", true) => handlers::delete(&shared, &target),
        ("DELETE", false) => handlers::delete_collection(&shared, &target, &params),
        (m, _) => Err(ApiError::method_not_allowed(format!(
            "{m} is not supported on {}",
            uri.path()
        ))),
    };
    match result {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    }
}

/// A TokenReview or SubjectAccessReview: create (POST) only, answered from
/// [`crate::reviews`].
fn review(shared: &Shared, kind: &str, method: &Method, body: &[u8]) -> Response {
    if method != Method::POST {
        let message = format!("{kind} supports create only");
        return ApiError::method_not_allowed(message).into_response();
    }
    let reviews = shared.reviews.lock();
    let answer = match kind {
        "TokenReview" => reviews.token_review(body),
        _ => reviews.access_review(body),
    };
    match answer {
        Ok(review) => (http::StatusCode::CREATED, axum::Json(review)).into_response(),
        Err(e) => e.into_response(),
    }
}

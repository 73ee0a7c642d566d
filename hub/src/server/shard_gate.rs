//! The shard gate in front of the agents' routes when replicas share the fleet: a request
//! for a cluster (`/v1/clusters/{namespace}/{name}/...`) whose shard this replica does not
//! own is answered, before any admission step, with `307 Temporary Redirect` to the
//! owner's URL (the same path and query; a 307 keeps the method and body) and a JSON
//! `unavailable` body naming the owner, so an agent that does not follow redirects backs
//! off and retries as it does against a standby. With no owner known (a shard between
//! holders, or this replica's own renewal lapsed), the answer is `503 unavailable`.
//!
//! Why a redirect, not forwarding: a forwarded heartbeat costs the receiving replica a
//! second TLS client connection and a copy of every body, on every heartbeat, for as long
//! as agents land on the wrong replica; a redirect costs one extra round trip once, after
//! which the agent sends to the owner directly until that refuses it.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header::LOCATION};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use fleetpulse_common::protocol::errors::RejectCode;

use crate::ids::ClusterId;
use crate::kubernetes::shard_leases::Shards;
use crate::refusal::Refusal;

/// The cluster an agent's request is for, from its path.
fn cluster_of(path: &str) -> Option<ClusterId> {
    let mut parts = path.strip_prefix("/v1/clusters/")?.split('/');
    let (namespace, name) = (parts.next()?, parts.next()?);
    (!namespace.is_empty() && !name.is_empty() && parts.next().is_some())
        .then(|| ClusterId::new(namespace, name))
}

/// The middleware: passes requests for owned shards (and every request not for a
/// cluster: probes, enrolment), answers the others with where to go.
pub async fn gate(State(shards): State<Shards>, request: Request, next: Next) -> Response {
    let answer =
        cluster_of(request.uri().path()).and_then(|cluster| elsewhere(&shards, &cluster, &request));
    match answer {
        Some(answer) => answer,
        None => next.run(request).await,
    }
}

/// The answer to `request`, for `cluster`, when that cluster is in a shard this replica
/// does not own: a redirect to the owner, or `503` while the shard has none; `None` when
/// this replica serves it.
pub fn elsewhere(shards: &Shards, cluster: &ClusterId, request: &Request) -> Option<Response> {
    let shard = shards.shard_of(cluster);
    if shards.owns(shard) {
        return None;
    }
    let count = shards.count();
    let answer = match shards
        .owner(shard)
        .filter(|o| o.identity != shards.identity())
    {
        Some(owner) => {
            let Some(url) = owner.url else {
                let why = format!(
                    "MemberCluster {cluster} is in shard {shard} of {count}, owned by hub replica {}, which \
                     published no URL on its shard Lease: give every replica the URL agents reach it at",
                    owner.identity
                );
                return Some(Refusal::new(RejectCode::Unavailable, why).into_response());
            };
            let path = request.uri().path_and_query().map_or("", |p| p.as_str());
            let location = format!("{}{path}", url.trim_end_matches('/'));
            let why = format!(
                "MemberCluster {cluster} is in shard {shard} of {count}, owned by hub replica {} at {url}: \
                 send to {location}",
                owner.identity
            );
            let mut response = Refusal::new(RejectCode::Unavailable, why).into_response();
            *response.status_mut() = StatusCode::TEMPORARY_REDIRECT;
            if let Ok(value) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(LOCATION, value);
            }
            response
        }
        None => {
            let why = format!(
                "MemberCluster {cluster} is in shard {shard} of {count}, which no hub replica owns right \
                 now (it is moving between replicas); retry shortly"
            );
            Refusal::new(RejectCode::Unavailable, why).into_response()
        }
    };
    Some(answer)
}

#[cfg(test)]
#[path = "shard_gate_tests.rs"]
mod tests;

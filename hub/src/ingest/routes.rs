//! The agents' two endpoints, matched by hand: `/v1/clusters/{namespace}/{name}/heartbeat`
//! and `.../config`. A path read in place costs no allocation but the cluster's id, where
//! the router's own parameters cost one per name and value on every request.

use fleetpulse_common::protocol::report::ClusterId;

/// Which agent endpoint a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST .../heartbeat`.
    Heartbeat,
    /// `GET .../config`.
    Config,
}

/// The cluster and endpoint of `path`, if it is an agent endpoint's: two non-empty
/// segments after `/v1/clusters/` (percent-decoded, as the router would), then `heartbeat`
/// or `config`.
pub fn agent_endpoint(path: &str) -> Option<(ClusterId, Endpoint)> {
    let rest = path.strip_prefix("/v1/clusters/")?;
    let mut parts = rest.split('/');
    let (Some(namespace), Some(name), Some(action), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let endpoint = match action {
        "heartbeat" => Endpoint::Heartbeat,
        "config" => Endpoint::Config,
        _ => return None,
    };
    if namespace.is_empty() || name.is_empty() {
        return None;
    }
    Some((
        ClusterId::new(decoded(namespace)?, decoded(name)?),
        endpoint,
    ))
}

/// A path segment percent-decoded; `None` if that is not UTF-8.
fn decoded(segment: &str) -> Option<String> {
    if !segment.contains('%') {
        return Some(segment.to_owned());
    }
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_paths_name_their_cluster_and_endpoint() {
        assert_eq!(
            agent_endpoint("/v1/clusters/fleet/edge-1/heartbeat"),
            Some((ClusterId::new("fleet", "edge-1"), Endpoint::Heartbeat))
        );
        assert_eq!(
            agent_endpoint("/v1/clusters/fleet/edge%2D1/config"),
            Some((ClusterId::new("fleet", "edge-1"), Endpoint::Config))
        );
        for other in [
            "/v1/clusters/fleet/edge-1",
            "/v1/clusters/fleet//heartbeat",
            "/v1/clusters//edge-1/heartbeat",
            "/v1/clusters/fleet/edge-1/heartbeat/",
            "/v1/clusters/fleet/edge-1/status",
            "/v1/clusters/fleet/edge%FF/heartbeat",
            "/healthz",
        ] {
            assert_eq!(agent_endpoint(other), None, "{other}");
        }
    }
}

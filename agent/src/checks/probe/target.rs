//! What a probe calls, from its spec (pure), and [`ProbeSpecError`] for specs that cannot
//! be run. An in-cluster Service is addressed by its DNS name,
//! `{name}.{namespace}.svc`, resolved by the cluster DNS the agent's pod uses.

use fleetpulse_common::api::check::{HttpProbe, HttpScheme, ServiceRef, TcpProbe};
use reqwest::Url;

/// Why a probe spec cannot be run. Each message names the field and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ProbeSpecError {
    /// An HTTP probe with neither `url` nor `service`.
    #[error("http probe has no target: set `http.url` (a full URL) or `http.service`")]
    HttpNoTarget,
    /// An HTTP probe with both `url` and `service`.
    #[error("http probe sets both `http.url` and `http.service`: keep only one")]
    HttpBothTargets,
    /// `path` or `scheme` next to `url`.
    #[error(
        "`http.{field}` applies to `http.service` only: with `http.url`, put the {field} into \
         the URL"
    )]
    HttpFieldNeedsService {
        /// `path` or `scheme`.
        field: &'static str,
    },
    /// `url` is not an absolute http(s) URL.
    #[error("`http.url` {url:?} is not an absolute http:// or https:// URL ({reason}); fix it")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// A Service reference with an empty name or namespace, or port 0.
    #[error("`{field}` is missing or empty: set the Service's {what}")]
    ServiceFieldMissing {
        /// The field, e.g. `http.service.port`.
        field: &'static str,
        /// What to set, e.g. `port (1-65535)`.
        what: &'static str,
    },
    /// `method` is not an HTTP method token.
    #[error("`http.method` {method:?} is not an HTTP method: use e.g. GET, HEAD or POST")]
    BadMethod {
        /// The method as given.
        method: String,
    },
    /// A header with an invalid name or value.
    #[error("`http.httpHeaders[{index}]` ({name:?}) is not a valid header: {reason}")]
    BadHeader {
        /// Position in `httpHeaders`.
        index: usize,
        /// The header name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// `caBundle` and `insecureSkipVerify` together.
    #[error(
        "http probe sets both `http.caBundle` and `http.insecureSkipVerify`: keep `caBundle` \
         to verify, or only `insecureSkipVerify` not to"
    )]
    CaBundleAndInsecure,
    /// `caBundle` is not a PEM bundle of usable CA certificates.
    #[error(
        "`http.caBundle` is not usable: {reason}; it must hold one or more 'BEGIN \
         CERTIFICATE' blocks of the CA that signed the endpoint's certificate"
    )]
    BadCaBundle {
        /// What is wrong.
        reason: String,
    },
    /// HTTPS without `caBundle` on a machine with no system roots.
    #[error(
        "no system root certificates could be loaded ({errors}): set `http.caBundle` to the \
         CA that signed the endpoint's certificate"
    )]
    NoSystemRoots {
        /// The loader's errors.
        errors: String,
    },
    /// The HTTP client could not be built (should not happen).
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// A TCP probe with neither `host` nor `service`.
    #[error("tcp probe has no target: set `tcp.host` and `tcp.port`, or `tcp.service`")]
    TcpNoTarget,
    /// A TCP probe with both `host` and `service`.
    #[error("tcp probe sets both `tcp.host` and `tcp.service`: keep only one")]
    TcpBothTargets,
    /// `tcp.host` without `tcp.port`.
    #[error("`tcp.port` is missing: set it (1-65535) next to `tcp.host`")]
    TcpPortMissing,
    /// `tcp.port` next to `tcp.service`.
    #[error("`tcp.port` applies to `tcp.host` only: with `tcp.service`, set `tcp.service.port`")]
    TcpPortWithService,
}

/// The DNS name of an in-cluster Service: `{name}.{namespace}.svc`.
pub fn service_host(service: &ServiceRef) -> String {
    format!("{}.{}.svc", service.name, service.namespace)
}

/// The URL an HTTP probe calls: `url`, or `{scheme}://{name}.{namespace}.svc:{port}{path}`
/// for `service` (scheme `HTTP` and path `/` by default).
pub fn http_url(probe: &HttpProbe) -> Result<Url, ProbeSpecError> {
    match (&probe.url, &probe.service) {
        (None, None) => Err(ProbeSpecError::HttpNoTarget),
        (Some(_), Some(_)) => Err(ProbeSpecError::HttpBothTargets),
        (Some(url), None) => {
            if probe.path.is_some() {
                return Err(ProbeSpecError::HttpFieldNeedsService { field: "path" });
            }
            if probe.scheme.is_some() {
                return Err(ProbeSpecError::HttpFieldNeedsService { field: "scheme" });
            }
            parse_url(url)
        }
        (None, Some(service)) => {
            check_service(service, "http")?;
            let scheme = match probe.scheme.unwrap_or_default() {
                HttpScheme::Http => "http",
                HttpScheme::Https => "https",
            };
            let path = probe.path.as_deref().unwrap_or("/");
            let slash = if path.starts_with('/') { "" } else { "/" };
            let host = service_host(service);
            parse_url(&format!("{scheme}://{host}:{}{slash}{path}", service.port))
        }
    }
}

/// Host and port a TCP probe connects to: `host` + `port`, or the Service's DNS name and
/// port.
pub fn tcp_address(probe: &TcpProbe) -> Result<(String, u16), ProbeSpecError> {
    let host = probe
        .host
        .as_deref()
        .map(str::trim)
        .filter(|h| !h.is_empty());
    match (host, &probe.service) {
        (None, None) => Err(ProbeSpecError::TcpNoTarget),
        (Some(_), Some(_)) => Err(ProbeSpecError::TcpBothTargets),
        (Some(host), None) => match probe.port {
            Some(port) if port > 0 => {
                // `[::1]` and `::1` both name the IPv6 loopback.
                let host = host.trim_start_matches('[').trim_end_matches(']');
                Ok((host.to_owned(), port))
            }
            _ => Err(ProbeSpecError::TcpPortMissing),
        },
        (None, Some(service)) => {
            if probe.port.is_some() {
                return Err(ProbeSpecError::TcpPortWithService);
            }
            check_service(service, "tcp")?;
            Ok((service_host(service), service.port))
        }
    }
}

/// `host:port`, with brackets around an IPv6 address.
pub fn display_address(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn parse_url(url: &str) -> Result<Url, ProbeSpecError> {
    let bad = |reason: String| ProbeSpecError::BadUrl {
        url: url.to_owned(),
        reason,
    };
    let parsed = Url::parse(url).map_err(|e| bad(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad(format!("scheme {:?}", parsed.scheme())));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host".to_owned()));
    }
    Ok(parsed)
}

fn check_service(service: &ServiceRef, kind: &'static str) -> Result<(), ProbeSpecError> {
    let missing = |field_http, field_tcp, what| ProbeSpecError::ServiceFieldMissing {
        field: if kind == "http" {
            field_http
        } else {
            field_tcp
        },
        what,
    };
    if service.name.trim().is_empty() {
        return Err(missing("http.service.name", "tcp.service.name", "name"));
    }
    if service.namespace.trim().is_empty() {
        return Err(missing(
            "http.service.namespace",
            "tcp.service.namespace",
            "namespace",
        ));
    }
    if service.port == 0 {
        return Err(missing(
            "http.service.port",
            "tcp.service.port",
            "port (1-65535)",
        ));
    }
    Ok(())
}

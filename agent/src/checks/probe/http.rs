//! The HTTP probe, as the kubelet's `httpGet` behaves:
//!
//! - a status in 200-399 passes, unless `expectedStatuses` lists the statuses that pass;
//! - redirects are followed to the same host name only (up to 10); a redirect to another
//!   host is not followed and its 3xx status is judged like any other (so it passes by
//!   default, as in the kubelet, which also only warns);
//! - no proxy (the kubelet ignores `HTTP_PROXY` for probes), no connection reuse, HTTP/1.1;
//! - a `User-Agent: fleetpulse-agent/<version>` and `Accept: */*` unless `httpHeaders`
//!   sets them; header values from Secrets are resolved by [`super::headers`], and no
//!   message ever contains a header value.
//!
//! Build an [`HttpProber`] once per spec and [`run`](HttpProber::run) it every period, or
//! call [`run_http_with`], which resolves the headers and builds one per call (and loads
//! the system roots each time).

use std::time::Duration;

use fleetpulse_common::api::check::HttpProbe;
use reqwest::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue, LOCATION, USER_AGENT};
use reqwest::redirect::{Attempt, Policy};
use reqwest::{Client, Method, Response, StatusCode, Url};

use super::headers::{ResolvedHeader, SecretSource};
use super::target::{self, ProbeSpecError};
use super::tls::{self, Verification};
use super::{describe_error, format_timeout};
use crate::checks::RunOutcome;

/// Redirects followed to the same host, as the kubelet.
pub const MAX_REDIRECTS: usize = 10;
/// How much of a failing response's body goes into the message.
const BODY_SNIPPET_CHARS: usize = 200;

/// Runs one HTTP probe whose headers are all inline (a header from a Secret fails: there
/// is no Secret to read); see [`run_http_with`].
pub async fn run_http(probe: &HttpProbe, timeout: Duration) -> RunOutcome {
    run_http_with(probe, &SecretSource::none(), timeout).await
}

/// Runs one HTTP probe: resolves its headers from `secrets` (within `timeout`; a Secret
/// read from the cache takes no time), builds an [`HttpProber`] and runs it once (within
/// `timeout` again). A spec that cannot be run, or a header whose Secret
/// or key is missing, is a failing outcome naming what to fix.
pub async fn run_http_with(
    probe: &HttpProbe,
    secrets: &SecretSource,
    timeout: Duration,
) -> RunOutcome {
    let headers = match tokio::time::timeout(timeout, secrets.resolve(&probe.http_headers)).await {
        Ok(Ok(headers)) => headers,
        Ok(Err(error)) => return RunOutcome::fail(format!("http probe header: {error}")),
        Err(_elapsed) => {
            return RunOutcome::fail(format!(
                "http probe: reading the headers' Secrets timed out after {}",
                format_timeout(timeout)
            ));
        }
    };
    match HttpProber::new(probe, &headers) {
        Ok(prober) => prober.run(timeout).await,
        Err(error) => RunOutcome::fail(format!("invalid http probe: {error}")),
    }
}

/// An HTTP probe ready to run: the URL, request and client (TLS, redirects) built once.
#[derive(Clone, Debug)]
pub struct HttpProber {
    client: Client,
    method: Method,
    url: Url,
    headers: HeaderMap,
    expected_statuses: Vec<u16>,
}

impl HttpProber {
    /// Checks `probe` and builds its client, sending `headers` (the probe's `httpHeaders`
    /// resolved). HTTPS is verified against `caBundle`, else the system roots, unless
    /// `insecureSkipVerify`.
    pub fn new(probe: &HttpProbe, headers: &[ResolvedHeader]) -> Result<Self, ProbeSpecError> {
        let url = target::http_url(probe)?;
        let method = parse_method(probe.method.as_deref())?;
        let headers = request_headers(headers)?;
        let verification = match (probe.ca_bundle.as_deref(), probe.insecure_skip_verify) {
            (Some(_), true) => return Err(ProbeSpecError::CaBundleAndInsecure),
            (Some(pem), false) => Verification::CaBundle(pem),
            (None, true) => Verification::Skip,
            (None, false) => Verification::SystemRoots {
                required: url.scheme() == "https",
            },
        };
        let client = Client::builder()
            .tls_backend_preconfigured(tls::client_config(verification)?)
            .http1_only()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .redirect(same_host_redirects())
            .build()
            .map_err(ProbeSpecError::Client)?;
        Ok(Self {
            client,
            method,
            url,
            headers,
            expected_statuses: probe.expected_statuses.clone(),
        })
    }

    /// The URL the probe calls.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// Whether `status` passes: one of `expectedStatuses`, or 200-399 when none are listed.
    pub fn accepts(&self, status: StatusCode) -> bool {
        if self.expected_statuses.is_empty() {
            (200..400).contains(&status.as_u16())
        } else {
            self.expected_statuses.contains(&status.as_u16())
        }
    }

    /// Sends the request; `timeout` bounds everything (connect, TLS, redirects, headers).
    pub async fn run(&self, timeout: Duration) -> RunOutcome {
        let what = format!("{} {}", self.method, self.url);
        let exchange = async {
            let response = self
                .client
                .request(self.method.clone(), self.url.clone())
                .headers(self.headers.clone())
                .send()
                .await?;
            let status = response.status();
            let detail = self.response_detail(&response);
            let snippet = if self.accepts(status) {
                None
            } else {
                body_snippet(response).await
            };
            Ok::<_, reqwest::Error>((status, detail, snippet))
        };
        let outcome = match tokio::time::timeout(timeout, exchange).await {
            Err(_elapsed) => RunOutcome::fail(format!(
                "{what}: timed out after {}",
                format_timeout(timeout)
            )),
            Ok(Err(error)) => RunOutcome::fail(format!("{what}: {}", describe_error(&error))),
            Ok(Ok((status, detail, _))) if self.accepts(status) => {
                RunOutcome::pass(format!("{what}: {status}{detail}"))
            }
            Ok(Ok((status, detail, snippet))) => {
                let body = snippet.map(|s| format!(": {s}")).unwrap_or_default();
                RunOutcome::fail(format!(
                    "{what}: {status} (expected {}){detail}{body}",
                    self.expected_text()
                ))
            }
        };
        tracing::debug!(
            url = %self.url,
            passing = outcome.passing,
            message = %outcome.message,
            "http probe ran"
        );
        outcome
    }

    /// ` (redirected to ...)` or ` (redirect to another host ..., not followed)`, or "".
    fn response_detail(&self, response: &Response) -> String {
        let status = response.status();
        let location = response.headers().get(LOCATION);
        if let (true, Some(location)) = (status.is_redirection(), location) {
            let location = String::from_utf8_lossy(location.as_bytes());
            return format!(" (redirect to {location} on another host, not followed)");
        }
        if response.url() != &self.url {
            return format!(" (redirected to {})", response.url());
        }
        String::new()
    }

    fn expected_text(&self) -> String {
        match self.expected_statuses.as_slice() {
            [] => "200-399".to_owned(),
            [one] => one.to_string(),
            many => {
                let list: Vec<String> = many.iter().map(u16::to_string).collect();
                format!("one of {}", list.join(", "))
            }
        }
    }
}

/// Follows redirects to the same host name (any port or scheme, as the kubelet compares
/// `URL.Hostname()`), up to [`MAX_REDIRECTS`]; stops, returning the 3xx response, at a
/// redirect to another host.
fn same_host_redirects() -> Policy {
    Policy::custom(|attempt: Attempt<'_>| {
        let first_host = attempt.previous().first().and_then(Url::host_str);
        let same_host = first_host == attempt.url().host_str();
        let followed = attempt.previous().len().saturating_sub(1);
        if !same_host {
            attempt.stop()
        } else if followed >= MAX_REDIRECTS {
            attempt.error(TooManyRedirects)
        } else {
            attempt.follow()
        }
    })
}

/// The redirect chain went past [`MAX_REDIRECTS`].
#[derive(Debug, thiserror::Error)]
#[error("stopped after {MAX_REDIRECTS} redirects")]
struct TooManyRedirects;

fn parse_method(method: Option<&str>) -> Result<Method, ProbeSpecError> {
    let Some(method) = method else {
        return Ok(Method::GET);
    };
    let valid = !method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase());
    match Method::from_bytes(method.as_bytes()) {
        Ok(parsed) if valid => Ok(parsed),
        _ => Err(ProbeSpecError::BadMethod {
            method: method.to_owned(),
        }),
    }
}

/// `httpHeaders` (repeated names are all sent), then the defaults they do not override.
/// Errors name the header, never its value.
fn request_headers(headers: &[ResolvedHeader]) -> Result<HeaderMap, ProbeSpecError> {
    let mut map = HeaderMap::new();
    for header in headers {
        let bad = |reason: String| ProbeSpecError::BadHeader {
            index: header.index,
            name: header.name.clone(),
            reason,
        };
        let name = HeaderName::from_bytes(header.name.as_bytes())
            .map_err(|e| bad(format!("name: {e}")))?;
        let mut value = HeaderValue::from_bytes(&header.value).map_err(|_| {
            bad(
                "the value holds a character a header cannot carry (a trailing newline \
                 in a Secret? create it with `kubectl create secret generic --from-literal`)"
                    .to_owned(),
            )
        })?;
        value.set_sensitive(true);
        map.append(name, value);
    }
    let agent = concat!("fleetpulse-agent/", env!("CARGO_PKG_VERSION"));
    map.entry(USER_AGENT)
        .or_insert(HeaderValue::from_static(agent));
    map.entry(ACCEPT).or_insert(HeaderValue::from_static("*/*"));
    Ok(map)
}

/// The start of a body, on one line; `None` when empty or unreadable.
async fn body_snippet(mut response: Response) -> Option<String> {
    let mut bytes = Vec::new();
    while bytes.len() < BODY_SNIPPET_CHARS * 4 {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut snippet: String = one_line.chars().take(BODY_SNIPPET_CHARS).collect();
    if snippet.is_empty() {
        return None;
    }
    if one_line.chars().count() > BODY_SNIPPET_CHARS {
        snippet.push_str("...");
    }
    Some(snippet)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prober(expected: Vec<u16>) -> HttpProber {
        let probe = HttpProbe {
            url: Some("http://127.0.0.1:1/".into()),
            expected_statuses: expected,
            ..HttpProbe::default()
        };
        HttpProber::new(&probe, &[]).unwrap()
    }

    #[test]
    fn default_statuses_are_the_kubelet_range() {
        let p = prober(vec![]);
        assert!(p.accepts(StatusCode::OK) && p.accepts(StatusCode::PERMANENT_REDIRECT));
        assert!(!p.accepts(StatusCode::BAD_REQUEST) && !p.accepts(StatusCode::CONTINUE));
        assert_eq!(p.expected_text(), "200-399");
    }

    #[test]
    fn listed_statuses_replace_the_default_range() {
        let p = prober(vec![200, 401]);
        assert!(p.accepts(StatusCode::UNAUTHORIZED) && !p.accepts(StatusCode::NO_CONTENT));
        assert_eq!(p.expected_text(), "one of 200, 401");
    }

    #[test]
    fn lowercase_or_empty_method_is_refused() {
        assert!(parse_method(Some("get")).is_err());
        assert!(parse_method(Some("")).is_err());
        assert_eq!(parse_method(Some("HEAD")).unwrap(), Method::HEAD);
    }

    #[test]
    fn custom_headers_override_the_defaults() {
        let map = request_headers(&[header("User-Agent", "probe/1")]).unwrap();
        assert_eq!(map.get_all(USER_AGENT).iter().count(), 1);
        assert_eq!(map[USER_AGENT], "probe/1");
        assert_eq!(map[ACCEPT], "*/*");
    }

    #[test]
    fn invalid_header_names_its_position() {
        let err = request_headers(&[header("bad header", "x")]).unwrap_err();
        assert!(err.to_string().contains("httpHeaders[0]"), "{err}");
    }

    #[test]
    fn an_invalid_value_is_refused_without_echoing_it() {
        let err = request_headers(&[header("Authorization", "Bearer s3cret\n")]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("httpHeaders[0]") && text.contains("newline"),
            "{text}"
        );
        assert!(!text.contains("s3cret"), "{text}");
    }

    fn header(name: &str, value: &str) -> ResolvedHeader {
        ResolvedHeader {
            index: 0,
            name: name.into(),
            value: value.into(),
        }
    }
}

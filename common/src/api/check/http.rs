//! The HTTP probe's spec: what to call and how to judge the answer, as the kubelet's
//! `httpGet`, plus request headers whose values are written inline (`value`) or read from
//! a Secret of the managed cluster (`valueFrom.secretKeyRef`, as a container's environment
//! variables are). Inline values, and a password in the URL, reach only the agents that run
//! the probe: everything the hub shows (read API, CLI) carries [`REDACTED`] instead
//! ([`HttpProbe::redact`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ServiceRef;

/// What the hub shows in place of an inline header value.
pub const REDACTED: &str = "<redacted>";

/// An HTTP probe, as the kubelet's `httpGet` behaves: any expected status passes.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpProbe {
    /// Full URL to call. Either `url` or `service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// In-cluster Service to call. Either `url` or `service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceRef>,
    /// Path for `service` (default `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `HTTP` or `HTTPS` for `service` (default `HTTP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<HttpScheme>,
    /// HTTP method (default `GET`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Z]+$"))]
    pub method: Option<String>,
    /// Extra request headers, each with an inline `value` or a `valueFrom.secretKeyRef`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_headers: Vec<HttpHeader>,
    /// Statuses that pass (default: 200-399, as the kubelet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_statuses: Vec<u16>,
    /// PEM CA bundle to verify an HTTPS endpoint against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// Do not verify the HTTPS certificate (as the kubelet does).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_verify: bool,
}

impl HttpProbe {
    /// Replaces every inline header value, and the password of a URL's user information
    /// (`https://user:password@host/`), with [`REDACTED`]. References stay as written:
    /// they name a Secret and a key, not what the Secret holds.
    pub fn redact(&mut self) {
        for header in &mut self.http_headers {
            if header.value.is_some() {
                header.value = Some(REDACTED.to_owned());
            }
        }
        if let Some(url) = &mut self.url {
            *url = without_password(url);
        }
    }
}

/// `url` with the password of its user information replaced by [`REDACTED`] (RFC 3986: the
/// authority follows `scheme://` up to the next `/`, `?` or `#`; user information is what
/// comes before its last `@`, the password what follows its first `:`).
fn without_password(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let Some(userinfo) = authority.rfind('@').map(|at| &authority[..at]) else {
        return url.to_owned();
    };
    match userinfo.find(':') {
        Some(colon) => format!(
            "{}{REDACTED}{}",
            &url[..start + colon + 1],
            &url[start + userinfo.len()..]
        ),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_urls_password_is_not_shown_and_the_rest_is() {
        let cases = [
            (
                "https://ops:s3cret@api.example.com/healthz",
                "https://ops:<redacted>@api.example.com/healthz",
            ),
            (
                "http://ops:p@ss:w@rd@10.0.0.1:8080",
                "http://ops:<redacted>@10.0.0.1:8080",
            ),
            ("https://:token@host?x=1", "https://:<redacted>@host?x=1"),
            ("https://ops@host/a@b", "https://ops@host/a@b"),
            (
                "https://host/path?user=a:b@c",
                "https://host/path?user=a:b@c",
            ),
            ("https://host:8443/", "https://host:8443/"),
            ("not a url", "not a url"),
        ];
        for (url, shown) in cases {
            assert_eq!(without_password(url), shown, "{url}");
        }
    }
}

/// URL scheme of an HTTP probe.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum HttpScheme {
    /// Plain HTTP.
    #[default]
    #[serde(rename = "HTTP")]
    Http,
    /// HTTPS.
    #[serde(rename = "HTTPS")]
    Https,
}

/// A request header of an HTTP probe: its value inline or from a Secret, exactly one.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.value) != has(self.valueFrom)",
    "message": "set exactly one of value and valueFrom.secretKeyRef"
}]))]
pub struct HttpHeader {
    /// Header name.
    pub name: String,
    /// Header value, written inline. The hub never shows it back (its read API and CLI
    /// show `<redacted>`); for credentials use `valueFrom.secretKeyRef`, which keeps the
    /// value out of the spec altogether.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Where the value comes from instead of `value`: a key of a Secret in the managed
    /// cluster, read by the agent when the probe runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<HeaderValueSource>,
}

impl HttpHeader {
    /// A header with an inline value.
    pub fn inline(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: Some(value.into()),
            value_from: None,
        }
    }

    /// A header whose value is key `key` of Secret `secret`.
    pub fn from_secret(name: impl Into<String>, secret: &str, key: &str) -> Self {
        Self {
            name: name.into(),
            value: None,
            value_from: Some(HeaderValueSource {
                secret_key_ref: SecretKeySelector {
                    name: secret.to_owned(),
                    key: key.to_owned(),
                    optional: false,
                },
            }),
        }
    }
}

/// Where a header's value comes from (the shape of a container's `env[].valueFrom`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeaderValueSource {
    /// A key of a Secret in the agent's checks namespace of the managed cluster (where pod
    /// checks run; `--checks-namespace`, the agent chart's `checks.namespace`). The agent
    /// needs `get` on it: list its name in the agent chart's `checks.secretNames`.
    pub secret_key_ref: SecretKeySelector,
}

/// A key of a Secret, as Kubernetes' `SecretKeySelector`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeySelector {
    /// Name of the Secret.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub name: String,
    /// Key within the Secret's `data`.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
    /// When true, a missing Secret or key sends the request without this header instead
    /// of failing the check (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

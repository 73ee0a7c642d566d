//! A GET against a hub listener as an operator's tool would send it: HTTPS trusting the
//! test CA, with a bearer token or none, answered with the status and the body (so tests
//! can assert a refusal's status and JSON error as well as a success), and one sample read
//! out of the `/metrics` text.

use std::path::Path;
use std::time::Duration;

/// The status and body of `GET url`, with `Authorization: Bearer token` when given.
pub async fn get(ca: &Path, url: &str, token: Option<&str>) -> anyhow::Result<(u16, String)> {
    let tls = fleetpulse_agent::tls::client_config(Some(&std::fs::read(ca)?))?;
    let http = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .timeout(Duration::from_secs(10))
        .build()?;
    let mut request = http.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await?))
}

/// The value of the sample `name` (with its labels, e.g.
/// `fleetpulse_hub_heartbeats_total{result="accepted"}`) in an OpenMetrics text, 0 if absent.
pub fn sample(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

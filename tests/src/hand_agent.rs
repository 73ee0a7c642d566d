//! A hand-driven agent of one cluster: it signs heartbeats and config requests with the
//! cluster's key, on a clock set off the real one when a test asks, or with a forged
//! signature, and sends them to a hub over the client it is given. Answers come back as
//! status, error code and `Retry-After`, so a test can assert a refusal as precisely as an
//! acceptance.

pub mod driven;

use ed25519_dalek::SigningKey;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use fleetpulse_agent::report::{ReportBuilder, sign_config_request, sign_report};
use fleetpulse_common::protocol::{AUTH_SCHEME, CONTENT_TYPE_JOSE, config_path, heartbeat_path};

use crate::fleet::SimCluster;

/// An answer: status, `code` of the JSON body (empty on success), `Retry-After`.
pub type Answer = (u16, String, Option<u64>);

/// One cluster's agent, driven by the test.
pub struct HandAgent {
    http: reqwest::Client,
    hub: String,
    cluster: SimCluster,
    reports: ReportBuilder,
    /// Seconds this agent's clock is ahead of the real one (negative: behind).
    clock_offset: i64,
    /// The config generation its reports say it applied.
    applied: u64,
}

impl HandAgent {
    /// An agent of `cluster` reporting to `hub` (`https://HOST:PORT`) on the real clock,
    /// booted now.
    pub fn new(http: reqwest::Client, hub: &str, cluster: &SimCluster) -> HandAgent {
        HandAgent::skewed(http, hub, cluster, 0)
    }

    /// An agent whose clock is `clock_offset` seconds ahead of the real one (behind when
    /// negative), as on a badly synchronised node: its boot (incarnation), `iat` and `exp`
    /// are all on that clock.
    pub fn skewed(
        http: reqwest::Client,
        hub: &str,
        cluster: &SimCluster,
        clock_offset: i64,
    ) -> HandAgent {
        let booted = Timestamp::now().as_millisecond() + clock_offset * 1_000;
        let reports = ReportBuilder::new(
            "fleetpulse".into(),
            cluster.id.clone(),
            "uid".into(),
            booted.unsigned_abs(),
        );
        HandAgent {
            http,
            hub: hub.to_owned(),
            cluster: cluster.clone(),
            reports,
            clock_offset,
            applied: 0,
        }
    }

    /// Says from now on that it applied config generation `generation` (the hub judges
    /// health only on reports made with the config it serves).
    pub fn apply_generation(&mut self, generation: u64) {
        self.applied = generation;
    }

    /// Seconds since the epoch on this agent's clock.
    fn now(&self) -> i64 {
        Timestamp::now().as_second() + self.clock_offset
    }

    /// The next report, signed; with `forged`, one character of its signature changed.
    pub fn next_jws(&mut self, forged: bool) -> String {
        let report = self.reports.build(self.now(), 1, self.applied, vec![]);
        let jws = sign_report(&self.cluster.key, &report);
        if !forged {
            return jws;
        }
        let at = jws.rfind('.').unwrap() + 5;
        let swapped = if &jws[at..=at] == "A" { "B" } else { "A" };
        format!("{}{swapped}{}", &jws[..at], &jws[at + 1..])
    }

    /// A heartbeat carrying `jws`, ready to send (owning what it needs).
    pub fn heartbeat_request(&self, jws: String) -> reqwest::RequestBuilder {
        let id = &self.cluster.id;
        let url = format!("{}{}", self.hub, heartbeat_path(&id.namespace, &id.name));
        self.http
            .post(url)
            .header("content-type", CONTENT_TYPE_JOSE)
            .body(jws)
    }

    /// The next heartbeat, ready to send.
    pub fn next_heartbeat(&mut self, forged: bool) -> reqwest::RequestBuilder {
        let jws = self.next_jws(forged);
        self.heartbeat_request(jws)
    }

    /// Sends the next heartbeat.
    pub async fn heartbeat(&mut self, forged: bool) -> Answer {
        answer(self.next_heartbeat(forged).send().await.unwrap()).await
    }

    /// Sends `jws` (a report signed earlier, to replay it) as a heartbeat.
    pub async fn resend(&self, jws: &str) -> Answer {
        answer(self.heartbeat_request(jws.to_owned()).send().await.unwrap()).await
    }

    /// Pulls the cluster's config with a request signed by `key`.
    pub async fn config(&self, key: &SigningKey) -> Answer {
        let id = &self.cluster.id;
        let jws = sign_config_request(key, &self.reports.config_request(self.now()));
        let url = format!("{}{}", self.hub, config_path(&id.namespace, &id.name));
        let request = self
            .http
            .get(url)
            .header("authorization", format!("{AUTH_SCHEME} {jws}"));
        answer(request.send().await.unwrap()).await
    }
}

/// Status, error code and `Retry-After` of `response`.
pub async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status().as_u16();
    let retry = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let body = response.text().await.unwrap();
    let code = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["code"].as_str().map(str::to_owned))
        .unwrap_or_default();
    (status, code, retry)
}

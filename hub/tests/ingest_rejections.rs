//! The hub's agent endpoints, called in-process through the real router over a fleet
//! backed by the embedded SQLite store: one accepted heartbeat, then every way a request
//! is refused. Each refusal must answer with its status and stable code, leave the
//! cluster's state exactly as it was, and not consume a sequence number.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Method, Request, StatusCode, header};
use ed25519_dalek::SigningKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde::de::DeserializeOwned;
use tempfile::TempDir;
use tower::ServiceExt;

use fleetpulse_common::api::condition::{HEALTHY, REACHABLE, READY, Status};
use fleetpulse_common::api::{
    AgentPublicKey, AgentSpec, CheckKind, CheckPhase, ClusterCheck, HeartbeatSpec, MemberCluster,
    MemberClusterSpec, MemberClusterStatus, ReadyNodesCheck, condition,
};
use fleetpulse_common::protocol::errors::{ErrorBody, RejectCode};
use fleetpulse_common::protocol::keys::{self, KeyId};
use fleetpulse_common::protocol::limits::MAX_BODY_BYTES;
use fleetpulse_common::protocol::replay::Freshness;
use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::{
    AgentConfig, CheckResult, ClusterId, ConfigRequest, HeartbeatAnswer, HeartbeatReport,
    SCHEMA_VERSION, Summary,
};
use fleetpulse_common::protocol::{
    AUTH_SCHEME, CONTENT_TYPE_JOSE, TYP_CONFIG_REQUEST, TYP_HEARTBEAT, config_path, heartbeat_path,
    jws,
};
use fleetpulse_hub::admission::Admission;
use fleetpulse_hub::core::digest;
use fleetpulse_hub::fleet::{Fleet, Objects, Settings, shared};
use fleetpulse_hub::ingest::{self, AppState};
use fleetpulse_hub::server::standby;
use fleetpulse_hub::store::sqlite::SqliteStore;
use fleetpulse_hub::store::{Store, StoreWriter};

const AUDIENCE: &str = "hub-under-test";
const INCARNATION: u64 = 1_700_000_000_000;
const INTERVAL_SECONDS: u32 = 15;

/// An HTTP answer, read whole.
struct Reply {
    status: StatusCode,
    body: Bytes,
}

impl Reply {
    fn json<T: DeserializeOwned>(&self) -> T {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} body is not the expected JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// Everything observable about the fleet that a refused request must leave alone.
#[derive(Debug, PartialEq)]
struct Observed {
    member_clusters: Vec<MemberCluster>,
    positions_of_a: std::collections::HashMap<String, Position>,
    status_writes: u64,
}

/// A hub with two clusters: `fleet/a` (key A, plus the revoked key R) and `fleet/b`
/// (key B), on a real SQLite store in a temporary directory.
struct Fixture {
    app: Router,
    fleet: Arc<Fleet>,
    data: TempDir,
    a: ClusterId,
    b: ClusterId,
    key_a: SigningKey,
    key_b: SigningKey,
    key_r: SigningKey,
    /// The last seq accepted for key A.
    last_seq: u64,
}

fn member_cluster(id: &ClusterId, keys: &[(&SigningKey, bool)]) -> MemberCluster {
    let public_keys = keys
        .iter()
        .map(|(key, revoked)| AgentPublicKey {
            public_key: keys::public_key_string(&key.verifying_key()),
            revoked: *revoked,
        })
        .collect();
    let spec = MemberClusterSpec {
        heartbeat: HeartbeatSpec {
            interval_seconds: INTERVAL_SECONDS,
            grace_period_seconds: 60,
            ..Default::default()
        },
        agent: AgentSpec { public_keys },
        readiness_checks: vec![ready_nodes_check()],
        ..Default::default()
    };
    let mut mc = MemberCluster::new(&id.name, spec);
    mc.metadata.namespace = Some(id.namespace.clone());
    mc
}

fn ready_nodes_check() -> ClusterCheck {
    ClusterCheck {
        name: "nodes".into(),
        ready_nodes: Some(ReadyNodesCheck {
            min_count: Some(1),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn check(name: &str, phase: CheckPhase, message: String) -> CheckResult {
    CheckResult {
        name: name.into(),
        kind: CheckKind::ReadyNodes,
        phase,
        passing: true,
        message,
        since: None,
        consecutive_failures: 0,
        success_rate_percent: None,
    }
}

fn now() -> i64 {
    Timestamp::now().as_second()
}

impl Fixture {
    /// The hub, assembled as `Hub::start` does, with no heartbeat accepted yet.
    fn new() -> Self {
        let data = tempfile::tempdir().unwrap();
        let mut store = SqliteStore::open(data.path()).unwrap();
        let snapshot = store.load().unwrap();
        let settings = Settings {
            audience: AUDIENCE.into(),
            ..Settings::default()
        };
        let fleet = Arc::new(Fleet::new(settings, StoreWriter::spawn(store)));
        fleet.restore(snapshot, Instant::now(), Timestamp::now());
        let (a, b) = (ClusterId::new("fleet", "a"), ClusterId::new("fleet", "b"));
        let (key_a, key_b, key_r) = (keys::generate(), keys::generate(), keys::generate());
        let objects = Objects {
            member_clusters: shared(vec![
                member_cluster(&a, &[(&key_a, false), (&key_r, true)]),
                member_cluster(&b, &[(&key_b, false)]),
            ]),
            ..Default::default()
        };
        let problems = fleet.reload(objects, Instant::now(), Timestamp::now());
        assert!(problems.is_empty(), "{problems:?}");
        // Strict verification, one signature at a time: every refusal below is the
        // strict one (batching refuses the same, see `admission::batch`).
        let admission = Admission::new(
            AUDIENCE.into(),
            Freshness::default(),
            None,
            Default::default(),
        );
        let app = ingest::router(AppState {
            fleet: fleet.clone(),
            admission: Arc::new(admission),
            failures: Default::default(),
        });
        Self {
            app,
            fleet,
            data,
            a,
            b,
            key_a,
            key_b,
            key_r,
            last_seq: 0,
        }
    }

    /// The hub after fleet/a's first heartbeat (seq 1) was accepted.
    async fn heartbeating() -> Self {
        let mut fx = Self::new();
        fx.accept(1).await;
        fx
    }

    /// A valid report about fleet/a, fresh by the hub's clock.
    fn report(&self, seq: u64) -> HeartbeatReport {
        let checks = vec![
            check("nodes", CheckPhase::Readiness, "3 of 3 nodes Ready".into()),
            // A message that changes on every report, as real check output does.
            check("api", CheckPhase::Liveness, format!("answered in {seq}ms")),
        ];
        HeartbeatReport {
            schema_version: SCHEMA_VERSION,
            aud: AUDIENCE.into(),
            cluster: self.a.clone(),
            cluster_uid: "2f9c6a44-uid-of-a".into(),
            agent_version: "0.1.0-test".into(),
            incarnation: INCARNATION,
            seq,
            iat: now(),
            exp: now() + 60,
            interval_seconds: INTERVAL_SECONDS,
            // The generation the hub serves after its first load: this agent pulled it.
            config_generation: 1,
            summary: Summary::of(&checks),
            checks,
        }
    }

    fn sign(&self, key: &SigningKey, report: &HeartbeatReport) -> String {
        jws::sign(key, TYP_HEARTBEAT, &serde_json::to_vec(report).unwrap())
    }

    /// `report(seq)` signed with key A.
    fn signed(&self, seq: u64) -> String {
        self.sign(&self.key_a, &self.report(seq))
    }

    fn next_seq(&self) -> u64 {
        self.last_seq + 1
    }

    async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        Reply { status, body }
    }

    async fn post(&self, path: &str, content_type: Option<&str>, body: impl Into<Body>) -> Reply {
        self.send(self.post_request(path, content_type, body)).await
    }

    async fn get(&self, path: &str, authorization: Option<String>) -> Reply {
        let mut request = Request::builder().method(Method::GET).uri(path);
        if let Some(authorization) = authorization {
            request = request.header(header::AUTHORIZATION, authorization);
        }
        self.send(request.body(Body::empty()).unwrap()).await
    }

    /// POSTs `token` as a heartbeat for fleet/a.
    async fn heartbeat(&self, token: impl Into<Body>) -> Reply {
        self.post(
            &self.heartbeat_path(&self.a),
            Some(CONTENT_TYPE_JOSE),
            token,
        )
        .await
    }

    fn heartbeat_path(&self, id: &ClusterId) -> String {
        heartbeat_path(&id.namespace, &id.name)
    }

    /// Sends the valid report `seq` for fleet/a and asserts it is accepted.
    async fn accept(&mut self, seq: u64) -> HeartbeatAnswer {
        self.accept_report(&self.report(seq)).await
    }

    /// Sends `report`, signed with key A, and asserts it is accepted.
    async fn accept_report(&mut self, report: &HeartbeatReport) -> HeartbeatAnswer {
        let seq = report.seq;
        let reply = self.heartbeat(self.sign(&self.key_a, report)).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "seq {seq} must be accepted: {}",
            String::from_utf8_lossy(&reply.body)
        );
        let answer: HeartbeatAnswer = reply.json();
        assert_eq!(answer.accepted_seq, seq);
        assert_eq!(answer.incarnation, INCARNATION);
        self.last_seq = seq;
        answer
    }

    fn status_of_a(&self) -> MemberClusterStatus {
        self.fleet
            .member_clusters()
            .into_iter()
            .find(|mc| mc.metadata.name.as_deref() == Some("a"))
            .and_then(|mc| mc.status)
            .expect("fleet/a has a live status")
    }

    fn observe(&self) -> Observed {
        let registry = self.fleet.registry();
        let a = registry.cluster(&self.a).expect("fleet/a is loaded");
        Observed {
            member_clusters: self.fleet.member_clusters(),
            positions_of_a: a.state.lock().core.positions.clone(),
            status_writes: self.fleet.status_writes(),
        }
    }

    /// Sends `request`, asserts it is refused with `status` and `code`, that nothing
    /// observable changed, and that the next seq is still accepted afterwards (the refused
    /// request consumed none). Returns the error body.
    async fn refused(
        &mut self,
        request: Request<Body>,
        status: StatusCode,
        code: &str,
    ) -> ErrorBody {
        let before = self.observe();
        let reply = self.send(request).await;
        let raw = String::from_utf8_lossy(&reply.body).into_owned();
        assert_eq!(reply.status, status, "{raw}");
        let json: serde_json::Value = reply.json();
        assert_eq!(json["code"], code, "{raw}");
        let body: ErrorBody = reply.json();
        assert_eq!(body.code.as_str(), code);
        assert!(!body.message.is_empty(), "a refusal says what failed");
        assert_eq!(self.observe(), before, "a refused request changed state");
        self.accept(self.next_seq()).await;
        body
    }

    fn post_request(
        &self,
        path: &str,
        content_type: Option<&str>,
        body: impl Into<Body>,
    ) -> Request<Body> {
        let mut request = Request::builder().method(Method::POST).uri(path);
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        request.body(body.into()).unwrap()
    }

    /// A heartbeat request for fleet/a carrying `token`.
    fn heartbeat_request(&self, token: impl Into<Body>) -> Request<Body> {
        self.post_request(
            &self.heartbeat_path(&self.a),
            Some(CONTENT_TYPE_JOSE),
            token,
        )
    }

    fn config_request(&self, key: &SigningKey, cluster: &ClusterId) -> String {
        let request = ConfigRequest {
            aud: AUDIENCE.into(),
            cluster: cluster.clone(),
            iat: now(),
            exp: now() + 60,
        };
        let token = jws::sign(
            key,
            TYP_CONFIG_REQUEST,
            &serde_json::to_vec(&request).unwrap(),
        );
        format!("{AUTH_SCHEME} {token}")
    }
}

fn condition_status(status: &MemberClusterStatus, type_: &str) -> Status {
    let c = condition::find(&status.conditions, type_).unwrap_or_else(|| panic!("no {type_}"));
    Status::parse(&c.status)
}

/// `token` with its payload part taken from `other`: header and signature stay.
fn with_payload_of(token: &str, other: &str) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    let payload = other.split('.').nth(1).unwrap();
    format!("{}.{payload}.{}", parts[0], parts[2])
}

// ---------------------------------------------------------------------------------------
// Accepted
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn first_valid_heartbeat_is_accepted_and_answered() {
    let mut fx = Fixture::new();
    let answer = fx.accept(1).await;
    assert_eq!(
        answer,
        HeartbeatAnswer {
            incarnation: INCARNATION,
            accepted_seq: 1,
            config_generation: 1,
            interval_seconds: INTERVAL_SECONDS,
            rotate_key: false,
        }
    );
    let status = fx.status_of_a();
    assert_eq!(condition_status(&status, REACHABLE), Status::True);
    assert_eq!(condition_status(&status, READY), Status::True);
    assert!(status.last_heartbeat_time.is_some());
    let agent = status.agent.expect("the reporting agent is recorded");
    assert_eq!(agent.key_id, KeyId::of(&fx.key_a.verifying_key()).0);
    assert_eq!(agent.incarnation, INCARNATION);
    assert_eq!(status.checks.len(), 2);
}

#[tokio::test]
async fn a_first_report_made_before_the_config_pull_does_not_make_the_cluster_ready() {
    let mut fx = Fixture::new();
    let mut report = fx.report(1);
    report.config_generation = 0;
    let reply = fx.heartbeat(fx.sign(&fx.key_a, &report)).await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    let status = fx.status_of_a();
    assert_eq!(condition_status(&status, REACHABLE), Status::True);
    assert_eq!(condition_status(&status, READY), Status::False);
    assert_eq!(condition_status(&status, HEALTHY), Status::False);
    fx.last_seq = 1;
    fx.accept(2).await;
    assert_eq!(
        condition_status(&fx.status_of_a(), READY),
        Status::True,
        "the report made with generation 1 proves readiness"
    );
}

#[tokio::test]
async fn steady_state_heartbeats_do_not_write_status() {
    let mut fx = Fixture::new();
    fx.accept(1).await;
    fx.accept(2).await;
    assert_eq!(
        condition_status(&fx.status_of_a(), HEALTHY),
        Status::True,
        "the default debounce makes a cluster Healthy on its second good report"
    );
    let writes = fx.fleet.status_writes();
    let conditions = fx.status_of_a().conditions;
    for seq in 3..=12 {
        fx.accept(seq).await;
    }
    assert_eq!(fx.fleet.status_writes(), writes, "no transition, no write");
    assert_eq!(fx.status_of_a().conditions, conditions);
    let checks = fx.status_of_a().checks;
    assert_eq!(
        checks[1].message, "answered in 12ms",
        "live status is still current"
    );
}

#[tokio::test]
async fn a_report_signing_the_last_ones_checks_text_is_given_the_kept_results() {
    let mut fx = Fixture::new();
    // Reports whose check results say the same, as most of a steady fleet's do.
    let steady = |fx: &Fixture, seq| {
        let mut report = fx.report(seq);
        report.checks[1].message = "answered in 4ms".into();
        report.summary = Summary::of(&report.checks);
        report
    };
    let kept = |fx: &Fixture, checks: &[CheckResult]| {
        let text = serde_json::to_string(checks).unwrap();
        let registry = fx.fleet.registry();
        let a = registry.cluster(&fx.a).expect("fleet/a is loaded");
        let kept = a.state.lock().agent_checks(digest::of(text.as_str()));
        kept.map(|checks| checks.to_vec())
    };
    let first = steady(&fx, 1);
    fx.accept_report(&first).await;
    assert_eq!(
        kept(&fx, &first.checks),
        Some(first.checks.clone()),
        "an accepted report's results are kept under the digest of their signed text"
    );
    fx.accept_report(&steady(&fx, 2)).await;
    assert_eq!(kept(&fx, &first.checks), Some(first.checks.clone()));

    let changed = fx.report(3);
    fx.accept_report(&changed).await;
    assert_eq!(
        kept(&fx, &first.checks),
        None,
        "the old text's results are gone"
    );
    assert_eq!(kept(&fx, &changed.checks), Some(changed.checks.clone()));
    assert_eq!(
        fx.status_of_a().checks[1].message,
        "answered in 3ms",
        "a report with other results is parsed and shown"
    );
}

// ---------------------------------------------------------------------------------------
// Refused: signature and keys
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn tampered_payload_is_rejected_as_bad_signature_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let seq = fx.next_seq();
    let token = fx.signed(seq);
    let mut forged = fx.report(seq);
    forged.summary.failing = 7;
    let tampered = with_payload_of(&token, &fx.sign(&fx.key_a, &forged));
    assert_ne!(tampered, token);
    let request = fx.heartbeat_request(tampered);
    fx.refused(request, StatusCode::UNAUTHORIZED, "bad_signature")
        .await;
}

#[tokio::test]
async fn report_signed_by_an_unknown_key_is_rejected_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let stranger = keys::generate();
    let token = fx.sign(&stranger, &fx.report(fx.next_seq()));
    let request = fx.heartbeat_request(token);
    fx.refused(request, StatusCode::UNAUTHORIZED, "unknown_key")
        .await;
}

#[tokio::test]
async fn report_signed_by_a_revoked_key_is_rejected_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let token = fx.sign(&fx.key_r, &fx.report(fx.next_seq()));
    let request = fx.heartbeat_request(token);
    fx.refused(request, StatusCode::FORBIDDEN, "key_revoked")
        .await;
}

#[tokio::test]
async fn report_signed_by_another_clusters_key_is_rejected_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let token = fx.sign(&fx.key_b, &fx.report(fx.next_seq()));
    let request = fx.heartbeat_request(token);
    fx.refused(request, StatusCode::FORBIDDEN, "key_not_for_cluster")
        .await;
}

// ---------------------------------------------------------------------------------------
// Refused: replay rules
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn replayed_heartbeat_is_rejected_with_last_accepted_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let request = fx.heartbeat_request(fx.signed(1));
    let body = fx.refused(request, StatusCode::CONFLICT, "replayed").await;
    let last = Position {
        incarnation: INCARNATION,
        seq: 1,
    };
    assert_eq!(body.last_accepted, Some(last));

    // What reaches the store is the last accepted position, never a refused one.
    let fleet = fx.fleet.clone();
    tokio::task::spawn_blocking(move || fleet.sync())
        .await
        .unwrap();
    let stored = SqliteStore::open(fx.data.path()).unwrap().load().unwrap();
    let kid = KeyId::of(&fx.key_a.verifying_key()).0;
    assert_eq!(
        stored.positions[&fx.a][&kid],
        Position {
            incarnation: INCARNATION,
            seq: 2,
        }
    );
}

#[tokio::test]
async fn older_sequence_is_rejected_as_stale_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    fx.accept(2).await;
    fx.accept(3).await;
    let request = fx.heartbeat_request(fx.signed(2));
    let body = fx
        .refused(request, StatusCode::CONFLICT, "stale_sequence")
        .await;
    let last = Position {
        incarnation: INCARNATION,
        seq: 3,
    };
    assert_eq!(body.last_accepted, Some(last));

    // An older incarnation is stale whatever its seq.
    let older_boot = HeartbeatReport {
        incarnation: INCARNATION - 1,
        seq: 1_000,
        ..fx.report(1_000)
    };
    let request = fx.heartbeat_request(fx.sign(&fx.key_a, &older_boot));
    fx.refused(request, StatusCode::CONFLICT, "stale_sequence")
        .await;
}

#[tokio::test]
async fn expired_report_is_rejected_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let an_hour_ago = now() - 3_600;
    let expired = HeartbeatReport {
        iat: an_hour_ago,
        exp: an_hour_ago + 60,
        ..fx.report(fx.next_seq())
    };
    let request = fx.heartbeat_request(fx.sign(&fx.key_a, &expired));
    fx.refused(request, StatusCode::UNAUTHORIZED, "report_expired")
        .await;

    let from_the_future = HeartbeatReport {
        iat: now() + 3_600,
        exp: now() + 3_660,
        ..fx.report(fx.next_seq())
    };
    let request = fx.heartbeat_request(fx.sign(&fx.key_a, &from_the_future));
    fx.refused(request, StatusCode::UNAUTHORIZED, "report_expired")
        .await;
}

#[tokio::test]
async fn report_for_another_hub_is_rejected_as_wrong_audience_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let elsewhere = HeartbeatReport {
        aud: "another-hub".into(),
        ..fx.report(fx.next_seq())
    };
    let request = fx.heartbeat_request(fx.sign(&fx.key_a, &elsewhere));
    fx.refused(request, StatusCode::MISDIRECTED_REQUEST, "wrong_audience")
        .await;
}

#[tokio::test]
async fn report_about_another_cluster_than_the_url_is_rejected_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let about_b = HeartbeatReport {
        cluster: fx.b.clone(),
        ..fx.report(fx.next_seq())
    };
    let request = fx.heartbeat_request(fx.sign(&fx.key_a, &about_b));
    fx.refused(request, StatusCode::FORBIDDEN, "cluster_mismatch")
        .await;
}

// ---------------------------------------------------------------------------------------
// Refused: transport and shape
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn oversize_body_is_rejected_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let request = fx.heartbeat_request(vec![b'A'; MAX_BODY_BYTES + 1]);
    fx.refused(request, StatusCode::PAYLOAD_TOO_LARGE, "body_too_large")
        .await;

    // Exactly at the limit the body is read (and refused for what it is, not its size).
    let request = fx.heartbeat_request(vec![b'A'; MAX_BODY_BYTES]);
    fx.refused(request, StatusCode::BAD_REQUEST, "malformed_jws")
        .await;
}

#[tokio::test]
async fn oversize_body_is_refused_for_its_size_before_its_media_type() {
    let mut fx = Fixture::heartbeating().await;
    let path = fx.heartbeat_path(&fx.a);
    let mut request = fx.post_request(&path, Some("text/plain"), vec![b'A'; MAX_BODY_BYTES + 1]);
    request.headers_mut().insert(
        header::CONTENT_LENGTH,
        (MAX_BODY_BYTES + 1).to_string().parse().unwrap(),
    );
    fx.refused(request, StatusCode::PAYLOAD_TOO_LARGE, "body_too_large")
        .await;
}

#[tokio::test]
async fn a_declared_oversize_body_is_refused_without_being_read() {
    let mut fx = Fixture::heartbeating().await;
    let polled = Arc::new(AtomicBool::new(false));
    let seen = polled.clone();
    let body = futures::stream::once(async move {
        seen.store(true, Ordering::SeqCst);
        Ok::<_, std::io::Error>(Bytes::from(vec![b'A'; 1024]))
    });
    let mut request = fx.heartbeat_request(Body::from_stream(body));
    request.headers_mut().insert(
        header::CONTENT_LENGTH,
        (10u64 << 20).to_string().parse().unwrap(),
    );
    fx.refused(request, StatusCode::PAYLOAD_TOO_LARGE, "body_too_large")
        .await;
    assert!(!polled.load(Ordering::SeqCst), "the body was read");
}

#[tokio::test]
async fn a_body_sent_without_a_length_is_cut_off_at_the_limit() {
    let mut fx = Fixture::heartbeating().await;
    let chunk = Bytes::from(vec![b'A'; 64 * 1024]);
    let chunks =
        (0..MAX_BODY_BYTES / chunk.len() + 1).map(move |_| Ok::<_, std::io::Error>(chunk.clone()));
    let request = fx.heartbeat_request(Body::from_stream(futures::stream::iter(chunks)));
    assert!(request.headers().get(header::CONTENT_LENGTH).is_none());
    fx.refused(request, StatusCode::PAYLOAD_TOO_LARGE, "body_too_large")
        .await;
}

#[tokio::test]
async fn signed_payload_that_is_not_a_report_is_rejected_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let token = jws::sign(&fx.key_a, TYP_HEARTBEAT, br#"{"hello":"world"}"#);
    let request = fx.heartbeat_request(token);
    fx.refused(
        request,
        StatusCode::UNPROCESSABLE_ENTITY,
        "malformed_report",
    )
    .await;

    let future_schema = HeartbeatReport {
        schema_version: SCHEMA_VERSION + 1,
        ..fx.report(fx.next_seq())
    };
    let request = fx.heartbeat_request(fx.sign(&fx.key_a, &future_schema));
    fx.refused(
        request,
        StatusCode::UNPROCESSABLE_ENTITY,
        "malformed_report",
    )
    .await;
}

#[tokio::test]
async fn malformed_jws_is_rejected_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let config_typ = jws::sign(
        &fx.key_a,
        TYP_CONFIG_REQUEST,
        &serde_json::to_vec(&fx.report(fx.next_seq())).unwrap(),
    );
    for token in [
        "not-a-jws".to_owned(),
        "a.b.c.d".to_owned(),
        format!("{}.", fx.signed(fx.next_seq())),
        config_typ,
    ] {
        let request = fx.heartbeat_request(token);
        fx.refused(request, StatusCode::BAD_REQUEST, "malformed_jws")
            .await;
    }
    let request = fx.heartbeat_request(vec![0xff, 0xfe, b'.', b'.']);
    fx.refused(request, StatusCode::BAD_REQUEST, "malformed_jws")
        .await;
}

#[tokio::test]
async fn wrong_content_type_is_rejected_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let path = fx.heartbeat_path(&fx.a);
    for content_type in [Some("application/json"), Some("text/plain"), None] {
        let request = fx.post_request(&path, content_type, fx.signed(fx.next_seq()));
        fx.refused(
            request,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        )
        .await;
    }
}

#[tokio::test]
async fn heartbeat_for_an_unknown_cluster_is_rejected_and_state_unchanged() {
    let mut fx = Fixture::heartbeating().await;
    let nowhere = ClusterId::new("fleet", "nowhere");
    let about_nowhere = HeartbeatReport {
        cluster: nowhere.clone(),
        ..fx.report(fx.next_seq())
    };
    let path = fx.heartbeat_path(&nowhere);
    let request = fx.post_request(
        &path,
        Some(CONTENT_TYPE_JOSE),
        fx.sign(&fx.key_a, &about_nowhere),
    );
    fx.refused(request, StatusCode::NOT_FOUND, "unknown_cluster")
        .await;
}

// ---------------------------------------------------------------------------------------
// Config and probes
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn signed_config_request_returns_the_effective_config() {
    let fx = Fixture::heartbeating().await;
    let path = config_path(&fx.a.namespace, &fx.a.name);
    let reply = fx
        .get(&path, Some(fx.config_request(&fx.key_a, &fx.a)))
        .await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let config: AgentConfig = reply.json();
    assert_eq!(
        config,
        AgentConfig {
            generation: 1,
            interval_seconds: INTERVAL_SECONDS,
            readiness_checks: vec![ready_nodes_check()],
            liveness_checks: Vec::new(),
            cluster_metadata: ObjectMeta {
                name: Some(fx.a.name.clone()),
                namespace: Some(fx.a.namespace.clone()),
                ..Default::default()
            },
        }
    );
}

#[tokio::test]
async fn config_request_without_authorization_is_rejected_as_malformed_jws() {
    let fx = Fixture::heartbeating().await;
    let path = config_path(&fx.a.namespace, &fx.a.name);
    for authorization in [None, Some("Bearer abc".to_owned())] {
        let reply = fx.get(&path, authorization).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        assert_eq!(reply.json::<ErrorBody>().code, RejectCode::MalformedJws);
    }
}

#[tokio::test]
async fn config_request_signed_by_another_clusters_key_is_rejected() {
    let fx = Fixture::heartbeating().await;
    let path = config_path(&fx.a.namespace, &fx.a.name);
    let reply = fx
        .get(&path, Some(fx.config_request(&fx.key_b, &fx.a)))
        .await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(reply.json::<ErrorBody>().code, RejectCode::KeyNotForCluster);
}

#[tokio::test]
async fn probes_answer_ok_when_ready() {
    let fx = Fixture::new();
    for path in ["/healthz", "/readyz"] {
        assert_eq!(fx.get(path, None).await.status, StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn the_agents_router_serves_neither_the_read_api_nor_metrics() {
    let fx = Fixture::heartbeating().await;
    for path in [
        "/v1/memberclusters",
        "/v1/hub",
        "/v1/clustersets",
        "/metrics",
    ] {
        assert_eq!(
            fx.get(path, None).await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
}

#[tokio::test]
async fn readyz_is_unavailable_until_the_hub_is_ready_but_healthz_is_ok() {
    // Until it has loaded its objects and state, the hub serves the standby router.
    let loading = standby::router("loading objects and state", false);
    let answer = |path: &'static str| {
        let loading = loading.clone();
        async move {
            let request = Request::builder().uri(path).body(Body::empty()).unwrap();
            loading.oneshot(request).await.unwrap().status()
        }
    };
    assert_eq!(answer("/readyz").await, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer("/healthz").await, StatusCode::OK);
    assert_eq!(
        answer("/v1/memberclusters").await,
        StatusCode::SERVICE_UNAVAILABLE
    );
}

//! Enrolment through the real routes, in process: tokens enrol their cluster's key once,
//! manual approval and revocation reach the heartbeat path's key lookup, every refusal
//! has its stable code and leaves the store as it was, and a burst of guesses is cut off.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use ed25519_dalek::SigningKey;
use fleetpulse_common::enrol::keyset::KeySet;
use fleetpulse_common::enrol::message::{
    Registration, RegistrationRequest, Rotation, RotationRequest, nonce,
};
use fleetpulse_common::enrol::token::{Approval, BootstrapToken, TokenRecord, TokenScope};
use fleetpulse_common::protocol::errors::RejectCode;
use fleetpulse_common::protocol::keys::{self, KeyId};
use fleetpulse_common::protocol::report::ClusterId;
use k8s_openapi::jiff::Timestamp;
use tower::ServiceExt;

use super::backend::{Backend, Versioned};
use super::store::EnrolStore;
use super::{EnrolSettings, Enrolment, routes};
use crate::admission::steps;
use crate::cli::enrolment::{KeyCommand, approve, key};
use crate::fleet::{Fleet, Objects, Settings};
use crate::testing;

struct Hub {
    dir: tempfile::TempDir,
    fleet: Arc<Fleet>,
    router: axum::Router,
}

fn cluster(name: &str) -> ClusterId {
    ClusterId::new("fleet", name)
}

fn hub() -> Hub {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Arc::new(testing::fleet_in_memory(Settings::default()));
    let member_clusters = ["fleet/edge-1", "fleet/edge-2"]
        .into_iter()
        .map(|id| Arc::new(testing::cluster(id).build()))
        .collect();
    let objects = Objects {
        member_clusters,
        ..Default::default()
    };
    assert!(
        fleet
            .reload(objects, Instant::now(), Timestamp::now())
            .is_empty()
    );
    let settings = EnrolSettings::new("fleetpulse".into(), Default::default());
    let enrolment = Enrolment::open(dir.path(), settings).unwrap();
    fleet.use_enrolled_keys(enrolment.clone());
    let router = routes::router(enrolment, fleet.clone());
    Hub { dir, fleet, router }
}

impl Hub {
    fn store(&self) -> EnrolStore {
        EnrolStore::open(self.dir.path()).unwrap()
    }

    fn token(&self, scope: ClusterId, approval: Approval, ttl: i64) -> BootstrapToken {
        let token = BootstrapToken::generate();
        let scope = TokenScope::Cluster { cluster: scope };
        let now = Timestamp::now().as_second();
        self.store()
            .put_token(&Versioned::new(TokenRecord::new(
                &token, scope, approval, now, ttl,
            )))
            .unwrap();
        token
    }

    /// What a refusal must leave unchanged.
    fn state(&self) -> (Vec<KeySet>, Vec<TokenRecord>) {
        let store = self.store();
        (store.keysets().unwrap(), store.tokens().unwrap())
    }

    async fn post(&self, path: &str, body: String) -> (StatusCode, serde_json::Value) {
        let request = Request::post(path)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    async fn enrol(
        &self,
        key: &SigningKey,
        cluster: &ClusterId,
        token: &BootstrapToken,
    ) -> (StatusCode, serde_json::Value) {
        let now = Timestamp::now().as_second();
        let registration = Registration {
            aud: "fleetpulse".into(),
            cluster: cluster.clone(),
            cluster_uid: String::new(),
            public_key: keys::public_key_string(&key.verifying_key()),
            token_id: token.id.clone(),
            token_secret: token.secret.clone(),
            iat: now,
            exp: now + 300,
            nonce: nonce(),
        };
        let body = serde_json::to_string(&RegistrationRequest::sign(key, &registration)).unwrap();
        self.post("/v1/enrol", body).await
    }

    fn lookup(&self, cluster: &ClusterId, key: &SigningKey) -> Result<(), RejectCode> {
        let kid = KeyId::of(&key.verifying_key()).0;
        let registry = self.fleet.registry();
        steps::key(&registry, self.fleet.enrolled_keys(), cluster, &kid)
            .map(|_| ())
            .map_err(|r| r.0.code)
    }

    /// Waits (up to 10 s) for the lookup to give `expected`: changes the CLI makes reach
    /// the running hub within about a second.
    async fn lookup_becomes(
        &self,
        cluster: &ClusterId,
        key: &SigningKey,
        expected: Result<(), RejectCode>,
    ) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = self.lookup(cluster, key);
            if got == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "lookup stayed {got:?}, expected {expected:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn code(body: &serde_json::Value) -> &str {
    body["code"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_enrols_its_clusters_key_once_and_the_heartbeat_path_accepts_it() {
    let hub = hub();
    let edge1 = cluster("edge-1");
    let token = hub.token(edge1.clone(), Approval::Auto, 3600);
    let agent = keys::generate();
    assert_eq!(hub.lookup(&edge1, &agent), Err(RejectCode::UnknownKey));

    let (status, body) = hub.enrol(&agent, &edge1, &token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "enrolled");
    assert_eq!(hub.lookup(&edge1, &agent), Ok(()));
    assert_eq!(
        hub.lookup(&cluster("edge-2"), &agent),
        Err(RejectCode::KeyNotForCluster)
    );

    // The same agent again (a restart with the token still set) is answered as before.
    let (status, _) = hub.enrol(&agent, &edge1, &token).await;
    assert_eq!(status, StatusCode::OK);

    // Another key with the used token is refused, and nothing changes.
    let before = hub.state();
    let (status, body) = hub.enrol(&keys::generate(), &edge1, &token).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "token_used"),
        "{body}"
    );
    assert_eq!(hub.state(), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manual_registration_waits_for_approve_and_a_revoked_key_is_refused() {
    let hub = hub();
    let edge1 = cluster("edge-1");
    let token = hub.token(edge1.clone(), Approval::Manual, 3600);
    let agent = keys::generate();
    let (status, body) = hub.enrol(&agent, &edge1, &token).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["state"], "awaitingApproval");
    assert_eq!(hub.lookup(&edge1, &agent), Err(RejectCode::UnknownKey));

    // The CLI's commands, on a connection of their own as from another process.
    approve(edge1.clone(), &hub.store()).unwrap();
    hub.lookup_becomes(&edge1, &agent, Ok(())).await;
    let (status, body) = hub.enrol(&agent, &edge1, &token).await;
    assert_eq!(
        (status, &body["state"]),
        (StatusCode::OK, &serde_json::json!("enrolled"))
    );

    let key_id = KeyId::of(&agent.verifying_key()).0;
    let revoke = KeyCommand::Revoke {
        cluster: edge1.clone(),
        key_id,
    };
    key(revoke, &hub.store()).unwrap();
    hub.lookup_becomes(&edge1, &agent, Err(RejectCode::KeyRevoked))
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_foreign_and_guessed_tokens_are_refused_with_their_codes_and_change_nothing() {
    let hub = hub();
    let edge1 = cluster("edge-1");
    let expired = hub.token(edge1.clone(), Approval::Auto, -1);
    let for_edge2 = hub.token(cluster("edge-2"), Approval::Auto, 3600);
    let before = hub.state();
    let agent = keys::generate();

    let (status, body) = hub.enrol(&agent, &edge1, &expired).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNAUTHORIZED, "token_expired"),
        "{body}"
    );
    let (status, body) = hub.enrol(&agent, &edge1, &for_edge2).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::FORBIDDEN, "token_not_for_cluster"),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("fleet/edge-2"),
        "{body}"
    );

    // A burst of guesses: each refused as invalid, then cut off (2 refusals counted above).
    let mut codes = Vec::new();
    for _ in 0..25 {
        let (_, body) = hub.enrol(&agent, &edge1, &BootstrapToken::generate()).await;
        codes.push(code(&body).to_owned());
    }
    assert!(
        codes[..18].iter().all(|c| c == "invalid_token"),
        "{codes:?}"
    );
    assert!(codes[18..].iter().all(|c| c == "rate_limited"), "{codes:?}");
    assert_eq!(hub.state(), before);
    assert_eq!(hub.lookup(&edge1, &agent), Err(RejectCode::UnknownKey));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotation_moves_the_cluster_to_the_new_key_and_keeps_the_old_one_during_the_overlap() {
    let hub = hub();
    let edge1 = cluster("edge-1");
    let token = hub.token(edge1.clone(), Approval::Auto, 3600);
    let old = keys::generate();
    assert_eq!(hub.enrol(&old, &edge1, &token).await.0, StatusCode::OK);
    let new = keys::generate();
    let now = Timestamp::now().as_second();
    let rotation = Rotation {
        aud: "fleetpulse".into(),
        cluster: edge1.clone(),
        current_key_id: KeyId::of(&old.verifying_key()).0,
        new_public_key: keys::public_key_string(&new.verifying_key()),
        iat: now,
        exp: now + 300,
        nonce: nonce(),
    };
    let request = serde_json::to_string(&RotationRequest::sign(&old, &new, &rotation)).unwrap();
    let (status, body) = hub.post("/v1/rotate", request.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(hub.lookup(&edge1, &new), Ok(()));
    assert_eq!(hub.lookup(&edge1, &old), Ok(()), "the old key overlaps");
    let before = hub.state();
    let (status, body) = hub.post("/v1/rotate", request).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "replayed"),
        "{body}"
    );
    assert_eq!(hub.state(), before);
}

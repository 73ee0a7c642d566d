//! Loop rules against a scripted in-memory hub, on Tokio's paused clock (so "waits a full
//! interval" is asserted exactly, with no real sleeping).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ed25519_dalek::VerifyingKey;
use fleetpulse_common::enrol::message::{Context, RotateAnswer, RotationRequest};
use fleetpulse_common::protocol::errors::{ErrorBody, RejectCode};
use fleetpulse_common::protocol::keys::KeyId;
use fleetpulse_common::protocol::replay::Position;
use fleetpulse_common::protocol::report::{
    AgentConfig, ClusterId, HeartbeatAnswer, HeartbeatReport,
};
use fleetpulse_common::protocol::{TYP_HEARTBEAT, jws, keys};
use tokio::time::Instant;

use super::{AgentHandle, spawn_with};
use crate::hub_client::{HubClient, HubError};
use crate::metrics::AgentMetrics;
use crate::report::unix_seconds;
use crate::{AgentOptions, Url};

mod retry_after;

const WAIT: Duration = Duration::from_secs(120);

/// What the fake hub does with one heartbeat; once the script is used up it accepts.
enum Reply {
    Accept,
    /// Accept, and ask the agent for a new key.
    AcceptAndRotate,
    Reject(RejectCode, Option<Position>),
    /// 503 `unavailable` with a `Retry-After` of this long.
    UnavailableFor(Duration),
    Hang,
    /// Accept, answering only after this long (a slow network).
    AcceptAfter(Duration),
}

struct Script {
    /// The key heartbeats must be signed with (a rotation replaces it).
    key: VerifyingKey,
    replies: VecDeque<Reply>,
    seen: Vec<(Instant, HeartbeatReport)>,
    /// Seqs of the heartbeats sent as hedges (over the other connection).
    beside: Vec<u64>,
    rotations: u32,
}

impl Script {
    /// The report a heartbeat carries, verified with the current key.
    fn report_of(&self, jws: &str) -> HeartbeatReport {
        let payload = jws::parse(jws, TYP_HEARTBEAT)
            .unwrap()
            .verify(&self.key)
            .unwrap();
        serde_json::from_slice(&payload).unwrap()
    }
}

#[derive(Clone)]
struct FakeHub(Arc<Mutex<Script>>);

impl FakeHub {
    fn seen(&self) -> Vec<(Instant, HeartbeatReport)> {
        self.0.lock().unwrap().seen.clone()
    }
}

impl HubClient for FakeHub {
    async fn send_heartbeat_beside(
        &self,
        jws: String,
        timeout: Duration,
    ) -> Result<HeartbeatAnswer, HubError> {
        {
            let mut script = self.0.lock().unwrap();
            let seq = script.report_of(&jws).seq;
            script.beside.push(seq);
        }
        self.send_heartbeat(jws, timeout).await
    }

    async fn send_heartbeat(&self, jws: String, _: Duration) -> Result<HeartbeatAnswer, HubError> {
        let reply = {
            let mut script = self.0.lock().unwrap();
            let report = script.report_of(&jws);
            script.seen.push((Instant::now(), report.clone()));
            let reply = script.replies.pop_front().unwrap_or(Reply::Accept);
            (reply, report)
        };
        if let (Reply::AcceptAfter(delay), _) = &reply {
            tokio::time::sleep(*delay).await;
        }
        match reply {
            (reply @ (Reply::Accept | Reply::AcceptAndRotate | Reply::AcceptAfter(_)), report) => {
                Ok(HeartbeatAnswer {
                    incarnation: report.incarnation,
                    accepted_seq: report.seq,
                    config_generation: 0,
                    interval_seconds: 10,
                    rotate_key: matches!(reply, Reply::AcceptAndRotate),
                })
            }
            (Reply::Reject(code, last_accepted), _) => Err(rejection(code, last_accepted, None)),
            (Reply::UnavailableFor(wait), _) => {
                Err(rejection(RejectCode::Unavailable, None, Some(wait)))
            }
            (Reply::Hang, _) => std::future::pending().await,
        }
    }

    async fn fetch_config(&self, _: String, _: Duration) -> Result<AgentConfig, HubError> {
        Ok(AgentConfig::default())
    }

    /// Verifies the rotation against the current key and the proof against the new one,
    /// then expects heartbeats signed with the new key.
    async fn rotate_key(
        &self,
        request: RotationRequest,
        _: Duration,
    ) -> Result<RotateAnswer, HubError> {
        let mut script = self.0.lock().unwrap();
        let cx = Context {
            audience: "fleetpulse",
            now_unix: unix_seconds(std::time::SystemTime::now()),
            freshness: Default::default(),
        };
        let (rotation, new_key) = request.verify(&script.key, cx).unwrap();
        let previous = KeyId::of(&script.key).0;
        assert_eq!(rotation.current_key_id, previous);
        script.key = new_key;
        script.rotations += 1;
        Ok(RotateAnswer {
            key_id: KeyId::of(&new_key).0,
            previous_key_id: previous,
            overlap_until: 0,
        })
    }
}

/// The error of a refusal with `code`, asking for `retry_after`.
fn rejection(
    code: RejectCode,
    last_accepted: Option<Position>,
    retry_after: Option<Duration>,
) -> HubError {
    HubError::Rejected {
        url: "fake".into(),
        status: code.http_status(),
        body: ErrorBody {
            code,
            message: format!("fake {code}"),
            last_accepted,
        },
        retry_after,
    }
}

/// A fake hub that expects reports signed by `key` and plays `replies`.
fn fake_hub(key: &ed25519_dalek::SigningKey, replies: impl IntoIterator<Item = Reply>) -> FakeHub {
    FakeHub(Arc::new(Mutex::new(Script {
        key: key.verifying_key(),
        replies: replies.into_iter().collect(),
        seen: Vec::new(),
        beside: Vec::new(),
        rotations: 0,
    })))
}

/// An agent (interval 10 s) on a fake hub that plays `replies`.
fn spawn_fake(replies: impl IntoIterator<Item = Reply>) -> (AgentHandle, FakeHub) {
    let (agent, hub, _) = spawn_fake_metered(replies);
    (agent, hub)
}

/// As [`spawn_fake`], with the metrics the agent records.
fn spawn_fake_metered(
    replies: impl IntoIterator<Item = Reply>,
) -> (AgentHandle, FakeHub, AgentMetrics) {
    let key = keys::generate();
    let hub = fake_hub(&key, replies);
    let opts = AgentOptions::new(
        Url::parse("https://hub.invalid").unwrap(),
        ClusterId::new("fleet", "edge-1"),
        key,
    );
    let metrics = opts.metrics.clone();
    (spawn_with(hub.clone(), opts), hub, metrics)
}

#[tokio::test(start_paused = true)]
async fn stale_sequence_moves_the_incarnation_above_the_hubs_and_resends_at_once() {
    let (agent, hub) = spawn_fake([]);
    let ours = agent.status().incarnation;
    let hubs = Position {
        incarnation: ours + 1_000,
        seq: 7,
    };
    hub.0
        .lock()
        .unwrap()
        .replies
        .push_back(Reply::Reject(RejectCode::StaleSequence, Some(hubs)));

    let status = agent
        .wait_for(WAIT, |s| s.accepted_total >= 1)
        .await
        .unwrap();
    let seen = hub.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[0].1.incarnation, seen[0].1.seq), (ours, 1));
    assert_eq!((seen[1].1.incarnation, seen[1].1.seq), (ours + 1_001, 1));
    assert_eq!(seen[1].0, seen[0].0, "the resend must not wait");
    assert_eq!(status.incarnation, ours + 1_001);
    assert_eq!(
        status.last_accepted,
        Some(Position {
            incarnation: ours + 1_001,
            seq: 1
        })
    );
    agent.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn incarnation_restart_happens_once_then_the_agent_waits_an_interval() {
    let (agent, hub) = spawn_fake([]);
    let ours = agent.status().incarnation;
    let hubs = Position {
        incarnation: ours + 5,
        seq: 1,
    };
    let later = Position {
        incarnation: ours + 50,
        seq: 1,
    };
    hub.0.lock().unwrap().replies.extend([
        Reply::Reject(RejectCode::Replayed, Some(hubs)),
        Reply::Reject(RejectCode::StaleSequence, Some(later)),
        Reply::Reject(RejectCode::StaleSequence, Some(later)),
    ]);

    agent
        .wait_for(WAIT, |s| s.accepted_total >= 1)
        .await
        .unwrap();
    let at: Vec<_> = hub
        .seen()
        .iter()
        .map(|(t, r)| (*t, r.incarnation - ours, r.seq))
        .collect();
    let t0 = at[0].0;
    assert_eq!(at.len(), 4, "{at:?}");
    assert_eq!(at[..2], [(t0, 0, 1), (t0, 6, 1)], "one immediate restart");
    let t1 = at[2].0;
    assert!(t1 - t0 >= Duration::from_secs(10), "then no tight loop");
    assert_eq!(
        at[2..],
        [(t1, 6, 2), (t1, 51, 1)],
        "the next heartbeat may restart again"
    );
    agent.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn permanent_rejection_is_retried_only_after_a_full_interval() {
    let (agent, hub) = spawn_fake([Reply::Reject(RejectCode::UnknownKey, None)]);
    let failed = agent
        .wait_for(WAIT, |s| s.consecutive_failures == 1)
        .await
        .unwrap();
    assert_eq!(failed.last_reject_code, Some(RejectCode::UnknownKey));
    assert!(failed.last_error.unwrap().contains("fake unknown_key"));

    let ok = agent
        .wait_for(WAIT, |s| s.accepted_total >= 1)
        .await
        .unwrap();
    assert_eq!(ok.consecutive_failures, 0);
    let seen = hub.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[1].0 - seen[0].0 >= Duration::from_secs(10));
    assert_eq!(seen[1].1.seq, 2);
    agent.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_slow_answer_does_not_delay_the_next_heartbeat() {
    let (agent, hub) = spawn_fake([Reply::AcceptAfter(Duration::from_secs(4))]);
    agent
        .wait_for(WAIT, |s| s.accepted_total >= 2)
        .await
        .unwrap();
    let seen = hub.seen();
    assert_eq!(
        seen[1].0 - seen[0].0,
        Duration::from_secs(10),
        "one interval after the first was sent, not after its answer"
    );
    agent.stop().await.unwrap();
}

/// The seq and time since the first request of what the fake hub saw.
fn seqs_and_times(hub: &FakeHub) -> Vec<(u64, Duration)> {
    let seen = hub.seen();
    let t0 = seen[0].0;
    seen.iter().map(|(t, r)| (r.seq, *t - t0)).collect()
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_retry_is_hedged_with_the_same_report_and_the_first_answer_wins() {
    let (agent, hub, metrics) = spawn_fake_metered([
        Reply::Reject(RejectCode::Unavailable, None),
        Reply::Hang,
        Reply::Accept,
    ]);
    let status = agent
        .wait_for(WAIT, |s| s.accepted_total >= 2)
        .await
        .unwrap();
    let seen = seqs_and_times(&hub);
    let retry = seen[1].1;
    let hedge_after = crate::hub_client::RetrySchedule::new(Duration::from_secs(10)).hedge_after();
    assert_eq!(
        seen[..3],
        [(1, Duration::ZERO), (2, retry), (2, retry + hedge_after)],
        "the unanswered retry's report, sent again beside it"
    );
    assert_eq!(
        hub.0.lock().unwrap().beside,
        [2],
        "only the hedge, over the other connection"
    );
    let scrape = metrics.encode(&[]);
    assert!(
        scrape.contains("\nfleetpulse_agent_heartbeat_hedges_total 1\n"),
        "the hedge is counted once:\n{scrape}"
    );
    assert_eq!(
        seen[3],
        (3, retry + hedge_after + Duration::from_secs(10)),
        "paced from the copy that was answered, and nothing sent in between"
    );
    assert_eq!(status.consecutive_failures, 0);
    agent.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_copy_refused_as_replayed_is_the_agents_own_and_changes_nothing() {
    let (agent, hub) = spawn_fake([]);
    let ours = agent.status().incarnation;
    let accepted = Position {
        incarnation: ours,
        seq: 2,
    };
    hub.0.lock().unwrap().replies.extend([
        Reply::Reject(RejectCode::Unavailable, None),
        // Accepted, but its answer is slow: the hedge reaches the hub meanwhile.
        Reply::AcceptAfter(Duration::from_secs(5)),
        Reply::Reject(RejectCode::Replayed, Some(accepted)),
    ]);
    let status = agent
        .wait_for(WAIT, |s| s.accepted_total >= 2)
        .await
        .unwrap();
    assert_eq!(
        status.incarnation, ours,
        "no incarnation restart for our own copy"
    );
    let seen = seqs_and_times(&hub);
    let retry = seen[1].1;
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        [1, 2, 2, 3],
        "{seen:?}"
    );
    assert_eq!(seen[3].1, retry + Duration::from_secs(10));
    assert_eq!(status.consecutive_failures, 0);
    agent.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn stop_abandons_a_request_the_hub_never_answers() {
    let (agent, hub) = spawn_fake([Reply::Hang]);
    agent
        .wait_for(WAIT, |s| s.last_sent.is_some())
        .await
        .unwrap();
    let stopped = tokio::time::timeout(Duration::from_secs(1), agent.stop()).await;
    let status = stopped.expect("stop must not wait for the hub").unwrap();
    assert_eq!(status.accepted_total, 0);
    assert_eq!(hub.seen().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn asked_by_the_hub_the_agent_rotates_between_heartbeats_and_signs_with_the_new_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.pem");
    let key = keys::generate();
    std::fs::write(&path, keys::to_pem(&key)).unwrap();
    let hub = FakeHub(Arc::new(Mutex::new(Script {
        key: key.verifying_key(),
        replies: [Reply::Accept, Reply::AcceptAndRotate]
            .into_iter()
            .collect(),
        seen: Vec::new(),
        beside: Vec::new(),
        rotations: 0,
    })));
    let mut opts = AgentOptions::new(
        Url::parse("https://hub.invalid").unwrap(),
        ClusterId::new("fleet", "edge-1"),
        key.clone(),
    );
    opts.rotation = Some(crate::rotation::RotationSettings {
        every: Duration::ZERO,
        store: crate::rotation::KeyStore::File(path.clone()),
    });
    let agent = spawn_with(hub.clone(), opts);
    // The fake verifies every heartbeat with the key it holds: after the rotation, the
    // new one; a heartbeat still signed with the old key would fail the test.
    let status = agent
        .wait_for(WAIT, |s| s.accepted_total >= 4)
        .await
        .unwrap();
    assert_eq!(status.key_rotations, 1);
    assert_eq!(hub.0.lock().unwrap().rotations, 1);
    let on_disk = crate::keys::read_key_file(&path).unwrap();
    assert_ne!(
        on_disk.to_bytes(),
        key.to_bytes(),
        "the new key was committed"
    );
    assert_eq!(on_disk.verifying_key(), hub.0.lock().unwrap().key);
    let seen = hub.seen();
    let gaps: Vec<Duration> = seen.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(
        gaps.iter().all(|g| *g == Duration::from_secs(10)),
        "no heartbeat missed or delayed by the rotation: {gaps:?}"
    );
    agent.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_agent_with_a_pre_shared_key_ignores_the_hubs_request_to_rotate() {
    let (agent, hub) = spawn_fake([Reply::AcceptAndRotate]);
    let status = agent
        .wait_for(WAIT, |s| s.accepted_total >= 2)
        .await
        .unwrap();
    assert_eq!(status.key_rotations, 0);
    assert_eq!(hub.0.lock().unwrap().rotations, 0);
    agent.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_rotation_interrupted_before_its_commit_is_finished_at_start_with_the_staged_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.pem");
    let (key, staged) = (keys::generate(), keys::generate());
    std::fs::write(&path, keys::to_pem(&key)).unwrap();
    // What a crash after staging (and perhaps after the hub's acceptance) leaves.
    std::fs::write(dir.path().join("agent.pem.next"), keys::to_pem(&staged)).unwrap();
    let hub = fake_hub(&key, []);
    let mut opts = AgentOptions::new(
        Url::parse("https://hub.invalid").unwrap(),
        ClusterId::new("fleet", "edge-1"),
        key,
    );
    opts.rotation = Some(crate::rotation::RotationSettings {
        every: Duration::ZERO,
        store: crate::rotation::KeyStore::File(path.clone()),
    });
    let agent = spawn_with(hub.clone(), opts);
    agent
        .wait_for(WAIT, |s| s.accepted_total >= 2)
        .await
        .unwrap();
    assert_eq!(hub.0.lock().unwrap().key, staged.verifying_key());
    let on_disk = crate::keys::read_key_file(&path).unwrap();
    assert_eq!(
        on_disk.to_bytes(),
        staged.to_bytes(),
        "the staged key is the key now"
    );
    assert!(!dir.path().join("agent.pem.next").exists());
    agent.stop().await.unwrap();
}

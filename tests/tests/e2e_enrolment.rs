//! Enrolment end to end with the real binaries: `fleetpulse-hub token create` hands out
//! tokens and the CA hash, agents started with `--bootstrap-token` and `--hub-ca-hash`
//! enrol (one through `fleetpulse-hub approve`, `Enrolled=False` with `AwaitingApproval`
//! until then) and become Reachable; a reused token, an
//! expired token, a token for another cluster, a wrong CA hash and a burst of guessed
//! tokens are each refused with a clear error and a stable code, and change nothing. A key
//! rotation asked with `fleetpulse-hub key rotate` under steady heartbeats misses none and
//! changes no condition, the old key is refused once the overlap ends, and a revoked key's
//! reports are refused within about one interval with the way to re-enrol.

use std::time::Duration;

use ed25519_dalek::SigningKey;
use fleetpulse_agent::AgentOptions;
use fleetpulse_agent::hub_client::{HttpHubClient, HubClient};
use fleetpulse_agent::report::{ReportBuilder, incarnation_at, sign_report, unix_seconds};
use fleetpulse_common::api::condition::{REACHABLE, Status};
use fleetpulse_common::enrol::message::RegistrationRequest;
use fleetpulse_common::enrol::token::BootstrapToken;
use fleetpulse_common::protocol::keys::{self, KeyId};
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_tests::embedded_hub::EmbeddedHub;
use fleetpulse_tests::fleet::condition_of;
use fleetpulse_tests::pki::Pki;
use fleetpulse_tests::process::{self, Running};
use fleetpulse_tests::wait::blocking_until;

const DEADLINE: Duration = Duration::from_secs(40);

struct Env {
    dir: tempfile::TempDir,
    chain: String,
    hub: EmbeddedHub,
}

impl Env {
    fn path(&self, p: &str) -> String {
        self.dir.path().join(p).display().to_string()
    }

    fn hub_cli(&self, args: &[&str]) -> anyhow::Result<String> {
        let data = self.path("data");
        let mut all = args.to_vec();
        all.extend(["--data", &data]);
        Ok(String::from_utf8(
            process::run("fleetpulse-hub", &all)?.stdout,
        )?)
    }

    /// `token create`; returns the token and the CA hash it printed.
    fn token(&self, extra: &[&str]) -> anyhow::Result<(String, String)> {
        let mut args = vec!["token", "create", "--tls-cert", &self.chain];
        args.extend_from_slice(extra);
        process::token_and_ca_hash(&self.hub_cli(&args)?)
    }

    fn agent(&self, label: &str, cluster: &str, token: &str, pin: &str) -> anyhow::Result<Running> {
        self.agent_with(label, cluster, token, pin, &[])
    }

    fn agent_with(
        &self,
        label: &str,
        cluster: &str,
        token: &str,
        pin: &str,
        extra: &[&str],
    ) -> anyhow::Result<Running> {
        let key = self.path(&format!("{label}.pem"));
        let mut args = vec![
            "run",
            "--hub",
            &self.hub.server,
            "--cluster",
            cluster,
            "--key-file",
            &key,
            "--bootstrap-token",
            token,
            "--hub-ca-hash",
            pin,
            "--interval-seconds",
            "1",
        ];
        args.extend_from_slice(extra);
        Running::spawn_logged("fleetpulse-agent", label, &args)
    }

    /// Runs an agent that must be refused: it exits with an error naming `code`.
    fn refused(
        &self,
        label: &str,
        cluster: &str,
        token: &str,
        pin: &str,
        code: &str,
    ) -> anyhow::Result<()> {
        let before = self.state()?;
        let mut agent = self.agent(label, cluster, token, pin)?;
        blocking_until(&format!("agent {label} to give up"), DEADLINE, || {
            agent.exited().is_some()
        })?;
        let status = agent.exited().expect("exited");
        anyhow::ensure!(!status.success(), "agent {label} exited successfully");
        let line = agent.log_line(code);
        anyhow::ensure!(line.is_some(), "agent {label} did not log {code:?}");
        anyhow::ensure!(
            self.state()? == before,
            "refused agent {label} changed the hub's state"
        );
        Ok(())
    }

    /// What a refusal must not change: the tokens and every cluster's Reachable.
    fn state(&self) -> anyhow::Result<(String, Vec<Status>)> {
        let tokens = self.hub_cli(&["token", "list"])?;
        let clusters = self.hub.clusters().unwrap_or_default();
        let reachable = ["edge-1", "edge-2", "edge-3"]
            .iter()
            .map(|n| condition_of(&clusters, &ClusterId::new("fleet", *n), REACHABLE))
            .collect();
        Ok((tokens, reachable))
    }

    fn reachable(&self, name: &str) -> bool {
        self.hub.clusters().is_some_and(|mcs| {
            condition_of(&mcs, &ClusterId::new("fleet", name), REACHABLE) == Status::True
        })
    }
}

fn start(hub_args: &[&str]) -> anyhow::Result<Env> {
    let dir = tempfile::tempdir()?;
    let mut pki = Pki::generate(dir.path())?;
    // The hub serves its CA after its own certificate, so agents can pin it.
    let chain = dir.path().join("hub-chain.pem");
    let pem = std::fs::read_to_string(&pki.server_cert)? + &std::fs::read_to_string(&pki.ca_cert)?;
    std::fs::write(&chain, pem)?;
    pki.server_cert = chain.clone();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests)?;
    for name in ["edge-1", "edge-2", "edge-3"] {
        std::fs::write(
            manifests.join(format!("{name}.yaml")),
            format!(
                "apiVersion: fleetpulse.io/v1alpha1\nkind: MemberCluster\nmetadata: {{name: {name}, namespace: fleet}}\n\
                 spec:\n  heartbeat: {{intervalSeconds: 1, gracePeriodSeconds: 5}}\n"
            ),
        )?;
    }
    let hub = EmbeddedHub::spawn(&manifests, &dir.path().join("data"), &pki, hub_args)?;
    blocking_until("the hub to serve its read API", DEADLINE, || {
        hub.clusters().is_some()
    })?;
    Ok(Env {
        chain: chain.display().to_string(),
        dir,
        hub,
    })
}

#[test]
fn agents_enrol_with_tokens_and_bad_tokens_or_a_wrong_ca_hash_are_refused_without_a_trace()
-> anyhow::Result<()> {
    let env = start(&[])?;
    blocking_until("every cluster AwaitingEnrolment", DEADLINE, || {
        ["edge-1", "edge-2", "edge-3"].iter().all(|n| {
            enrolled(&env, n).is_some_and(|(s, r)| s == Status::False && r == "AwaitingEnrolment")
        })
    })?;
    let (t1, pin) = env.token(&["--cluster", "fleet/edge-1"])?;
    let (t2, _) = env.token(&["--cluster", "fleet/edge-2"])?;
    let (t3, _) = env.token(&["--cluster", "fleet/edge-3", "--approval", "manual"])?;
    let _a1 = env.agent("edge-1", "fleet/edge-1", &t1, &pin)?;
    let _a2 = env.agent("edge-2", "fleet/edge-2", &t2, &pin)?;
    let a3 = env.agent("edge-3", "fleet/edge-3", &t3, &pin)?;
    blocking_until("edge-1 and edge-2 Reachable", DEADLINE, || {
        env.reachable("edge-1") && env.reachable("edge-2")
    })?;
    blocking_until("edge-3 to say it awaits approval", DEADLINE, || {
        a3.log_line("awaits approval").is_some()
    })?;
    assert!(!env.reachable("edge-3"), "edge-3 reports before approval");
    blocking_until("edge-3 Enrolled=False, AwaitingApproval", DEADLINE, || {
        enrolled(&env, "edge-3") == Some((Status::False, "AwaitingApproval".into()))
    })?;
    for name in ["edge-1", "edge-2"] {
        blocking_until(&format!("{name} Enrolled"), DEADLINE, || {
            enrolled(&env, name) == Some((Status::True, "KeyEnrolled".into()))
        })?;
    }
    env.hub_cli(&["approve", "fleet/edge-3"])?;
    blocking_until("edge-3 Reachable after approval", DEADLINE, || {
        env.reachable("edge-3")
    })?;
    blocking_until("edge-3 Enrolled after approval", DEADLINE, || {
        enrolled(&env, "edge-3") == Some((Status::True, "KeyEnrolled".into()))
    })?;

    // Refusals, each with its stable code and no change on the hub.
    env.refused("reused", "fleet/edge-1", &t1, &pin, "token_used")?;
    let (expired, _) = env.token(&["--cluster", "fleet/edge-1", "--ttl", "0s"])?;
    env.refused("expired", "fleet/edge-1", &expired, &pin, "token_expired")?;
    let (other, _) = env.token(&["--cluster", "fleet/edge-2"])?;
    env.refused(
        "foreign",
        "fleet/edge-1",
        &other,
        &pin,
        "token_not_for_cluster",
    )?;
    // An embedded hub reads its MemberClusters from files: it cannot create one.
    let refused = env.token(&["--cluster", "fleet/edge-9", "--create-cluster"]);
    let message = format!("{:#}", refused.expect_err("--create-cluster refused"));
    assert!(
        message.contains("--create-cluster needs a hub in Kubernetes mode"),
        "{message}"
    );
    let wrong_pin = format!("sha256:{}", "0".repeat(64));
    let (fresh, _) = env.token(&["--cluster", "fleet/edge-1"])?;
    env.refused(
        "wrong-ca",
        "fleet/edge-1",
        &fresh,
        &wrong_pin,
        "matching --hub-ca-hash",
    )?;

    // A burst of guessed tokens from one source: refused as invalid, then cut off.
    let before = env.state()?;
    let codes = guess_tokens(&env, 30)?;
    assert!(
        codes.iter().take(10).all(|c| c == "invalid_token"),
        "{codes:?}"
    );
    assert!(codes.iter().any(|c| c == "rate_limited"), "{codes:?}");
    assert!(
        codes
            .iter()
            .all(|c| c == "invalid_token" || c == "rate_limited"),
        "{codes:?}"
    );
    assert_eq!(env.state()?, before);
    Ok(())
}

fn guess_tokens(env: &Env, n: usize) -> anyhow::Result<Vec<String>> {
    let ca = std::fs::read(&env.hub.ca)?;
    let tls = fleetpulse_agent::tls::client_config(Some(&ca))?;
    let url = format!("{}/v1/enrol", env.hub.server);
    tokio::runtime::Runtime::new()?.block_on(async {
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .build()?;
        let mut codes = Vec::new();
        for _ in 0..n {
            let key = keys::generate();
            let opts = fleetpulse_agent::AgentOptions::new(
                env.hub.server.parse()?,
                ClusterId::new("fleet", "edge-1"),
                key.clone(),
            );
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            let registration =
                fleetpulse_agent::enrol::registration(&opts, &BootstrapToken::generate(), now);
            let body = RegistrationRequest::sign(&key, &registration);
            let answer: serde_json::Value =
                client.post(&url).json(&body).send().await?.json().await?;
            codes.push(answer["code"].as_str().unwrap_or("none").to_owned());
        }
        Ok::<_, anyhow::Error>(codes)
    })
}

/// The `Enrolled` condition of `name` on the hub's read API, as `(status, reason)`.
fn enrolled(env: &Env, name: &str) -> Option<(Status, String)> {
    let status = status(env, name);
    (status.conditions.iter())
        .find(|c| c.type_ == "Enrolled")
        .map(|c| (Status::parse(&c.status), c.reason.clone()))
}

/// The live status of `name` on the hub's read API.
fn status(env: &Env, name: &str) -> fleetpulse_common::api::MemberClusterStatus {
    (env.hub.clusters().unwrap_or_default().into_iter())
        .find(|mc| mc.metadata.name.as_deref() == Some(name))
        .and_then(|mc| mc.status)
        .unwrap_or_default()
}

/// One heartbeat for `cluster` signed with `key`, as an agent would send it: `Ok` when the
/// hub accepts it, else the stable code it refused it with.
fn heartbeat_with(env: &Env, cluster: &ClusterId, key: &SigningKey) -> anyhow::Result<String> {
    let ca = std::fs::read(&env.hub.ca)?;
    let mut opts = AgentOptions::new(env.hub.server.parse()?, cluster.clone(), key.clone());
    opts.hub_ca_pem = Some(ca);
    tokio::runtime::Runtime::new()?.block_on(async {
        let client = HttpHubClient::for_agent(&opts)?;
        let now = std::time::SystemTime::now();
        let mut reports = ReportBuilder::new(
            "fleetpulse".into(),
            cluster.clone(),
            String::new(),
            incarnation_at(now),
        );
        let report = reports.build(unix_seconds(now), 1, 0, Vec::new());
        let sent = client
            .send_heartbeat(sign_report(key, &report), Duration::from_secs(5))
            .await;
        Ok(match sent {
            Ok(_) => "accepted".to_owned(),
            Err(e) => e.code().map_or_else(|| e.to_string(), |c| c.to_string()),
        })
    })
}

#[test]
fn a_rotation_under_steady_heartbeats_misses_none_retires_the_old_key_and_a_revoked_key_is_refused()
-> anyhow::Result<()> {
    let env = start(&["--key-overlap", "3s"])?;
    let (token, pin) = env.token(&["--cluster", "fleet/edge-1"])?;
    let agent = env.agent_with(
        "edge-1",
        "fleet/edge-1",
        &token,
        &pin,
        &["--rotate-key-every", "0"],
    )?;
    blocking_until("edge-1 Reachable", DEADLINE, || env.reachable("edge-1"))?;
    blocking_until("edge-1 Healthy", DEADLINE, || {
        condition_of(
            &env.hub.clusters().unwrap_or_default(),
            &ClusterId::new("fleet", "edge-1"),
            fleetpulse_common::api::condition::HEALTHY,
        ) == Status::True
    })?;
    let cluster = ClusterId::new("fleet", "edge-1");
    let old = fleetpulse_agent::keys::read_key_file(std::path::Path::new(&env.path("edge-1.pem")))?;
    let old_id = KeyId::of(&old.verifying_key()).0;
    let before = status(&env, "edge-1");
    assert_eq!(
        before.agent.as_ref().map(|a| a.key_id.as_str()),
        Some(old_id.as_str())
    );

    let asked = env.hub_cli(&["key", "rotate", "fleet/edge-1"])?;
    assert!(
        asked.contains("rotates after its next heartbeat"),
        "{asked}"
    );
    let (new_id, _) = fleetpulse_tests::wait::blocking_until_some(
        "the hub to see reports signed with a new key",
        DEADLINE,
        || {
            let kid = status(&env, "edge-1").agent.map(|a| a.key_id)?;
            (kid != old_id).then_some(kid)
        },
    )?;
    let on_disk =
        fleetpulse_agent::keys::read_key_file(std::path::Path::new(&env.path("edge-1.pem")))?;
    assert_eq!(
        KeyId::of(&on_disk.verifying_key()).0,
        new_id,
        "the agent saved its new key"
    );
    assert!(agent.log_line("rotated the agent key").is_some());
    // Steady: the agent keeps reporting with the new key and nothing else changed.
    let seen = status(&env, "edge-1").last_heartbeat_time;
    blocking_until("three more heartbeats", DEADLINE, || {
        let now = status(&env, "edge-1").last_heartbeat_time;
        now.zip(seen.clone())
            .is_some_and(|(n, s)| n.0.as_second() >= s.0.as_second() + 3)
    })?;
    let after = status(&env, "edge-1");
    assert_eq!(
        after.conditions, before.conditions,
        "a rotation changes no condition"
    );
    for line in ["heartbeat failed", "hub refused the heartbeat"] {
        assert!(agent.log_line(line).is_none(), "the agent logged {line:?}");
    }
    // The old key: accepted during the overlap at most, refused once it ended.
    let (code, waited) =
        fleetpulse_tests::wait::blocking_until_some("the old key to be refused", DEADLINE, || {
            heartbeat_with(&env, &cluster, &old)
                .ok()
                .filter(|c| c != "accepted")
        })?;
    println!(
        "old key refused with {code} {:.1}s after the rotation showed",
        waited.as_secs_f64()
    );
    assert_eq!(code, "key_retired");

    // Revocation: the agent's reports are refused within about one interval (1 s, plus
    // the hub's once-a-second look at its store), and it says how to re-enrol.
    let revoked_at = std::time::Instant::now();
    env.hub_cli(&["key", "revoke", "fleet/edge-1", &new_id])?;
    blocking_until("the agent to log the revocation", DEADLINE, || {
        agent.log_line("key_revoked").is_some()
    })?;
    let took = revoked_at.elapsed();
    println!("revoked key refused after {:.1}s", took.as_secs_f64());
    let line = agent.log_line("key_revoked").unwrap_or_default();
    assert!(line.contains("bootstrap-token"), "{line}");
    assert!(
        took < Duration::from_secs(6),
        "refused within about one interval: {took:?}"
    );
    Ok(())
}

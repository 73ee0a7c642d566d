//! Test doubles and sentence-like fixtures shared by every hub test (built with the
//! `testing` feature, or in the hub's own unit tests; never in a release binary):
//! an in-memory store, a fleet over it, a MemberCluster builder, and heartbeat reports.
//!
//! ```text
//! let fleet = testing::fleet_in_memory(Settings::default());
//! let mc = testing::cluster("fleet/a").label("env", "prod").key(&key).interval(10).build();
//! let report = testing::report(&id).seq(3).at(wall).generation(1).build();
//! ```

mod memory_store;

use ed25519_dalek::SigningKey;
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::{
    AgentPublicKey, ClusterCheck, MemberCluster, MemberClusterSpec, ReadyNodesCheck,
};
use fleetpulse_common::protocol::keys;
use fleetpulse_common::protocol::report::{
    CheckResult, ClusterId, HeartbeatReport, SCHEMA_VERSION, Summary,
};

pub use memory_store::MemoryStore;

use crate::core::cluster::Report;
use crate::fleet::Admitted;
use crate::fleet::{ClusterEntry, Fleet, Settings};
use crate::store::StoreWriter;

/// A fleet with `settings` over a fresh [`MemoryStore`].
pub fn fleet_in_memory(settings: Settings) -> Fleet {
    Fleet::new(settings, StoreWriter::spawn(MemoryStore::new()))
}

/// A MemberCluster `namespace/name` to build.
pub fn cluster(id: &str) -> ClusterBuilder {
    let (namespace, name) = id.split_once('/').unwrap_or(("default", id));
    let mut mc = MemberCluster::new(name, MemberClusterSpec::default());
    mc.metadata.namespace = Some(namespace.to_owned());
    ClusterBuilder(mc)
}

/// Builds a MemberCluster sentence by sentence.
pub struct ClusterBuilder(MemberCluster);

impl ClusterBuilder {
    /// With label `key=value`.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        let labels = self.0.metadata.labels.get_or_insert_with(Default::default);
        labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Listing `key` as its agent's key.
    pub fn key(self, key: &SigningKey) -> Self {
        self.listed_key(key, false)
    }

    /// Listing `key` as revoked.
    pub fn revoked_key(self, key: &SigningKey) -> Self {
        self.listed_key(key, true)
    }

    /// Listing `key`, revoked or not.
    pub fn listed_key(mut self, key: &SigningKey, revoked: bool) -> Self {
        self.0.spec.agent.public_keys.push(AgentPublicKey {
            public_key: keys::public_key_string(&key.verifying_key()),
            revoked,
        });
        self
    }

    /// Reporting every `seconds`.
    pub fn interval(mut self, seconds: u32) -> Self {
        self.0.spec.heartbeat.interval_seconds = seconds;
        self
    }

    /// Judged unreachable after `seconds` of silence.
    pub fn grace(mut self, seconds: u32) -> Self {
        self.0.spec.heartbeat.grace_period_seconds = seconds;
        self
    }

    /// With `check` among its readiness checks.
    pub fn readiness(mut self, check: ClusterCheck) -> Self {
        self.0.spec.readiness_checks.push(check);
        self
    }

    /// With `check` among its liveness checks.
    pub fn liveness(mut self, check: ClusterCheck) -> Self {
        self.0.spec.liveness_checks.push(check);
        self
    }

    /// At `metadata.generation`.
    pub fn generation(mut self, generation: i64) -> Self {
        self.0.metadata.generation = Some(generation);
        self
    }

    /// The MemberCluster.
    pub fn build(self) -> MemberCluster {
        self.0
    }
}

/// A `readyNodes` check named `name` wanting at least one Ready node.
pub fn ready_nodes(name: &str) -> ClusterCheck {
    ClusterCheck {
        name: name.into(),
        ready_nodes: Some(ReadyNodesCheck {
            min_count: Some(1),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A heartbeat report about `cluster` to build: seq 1, incarnation 1, issued now for five
/// minutes, to audience `fleetpulse`, with no checks and config generation 0.
pub fn report(cluster: &ClusterId) -> ReportBuilder {
    let now = Timestamp::now().as_second();
    ReportBuilder(HeartbeatReport {
        schema_version: SCHEMA_VERSION,
        aud: "fleetpulse".into(),
        cluster: cluster.clone(),
        cluster_uid: "uid".into(),
        agent_version: "test".into(),
        incarnation: 1,
        seq: 1,
        iat: now,
        exp: now + 300,
        interval_seconds: 10,
        config_generation: 0,
        checks: vec![],
        summary: Summary::of(&[]),
    })
}

/// Builds a heartbeat report sentence by sentence.
pub struct ReportBuilder(HeartbeatReport);

impl ReportBuilder {
    /// With sequence number `seq`.
    pub fn seq(mut self, seq: u64) -> Self {
        self.0.seq = seq;
        self
    }

    /// From the agent process of incarnation `incarnation`.
    pub fn incarnation(mut self, incarnation: u64) -> Self {
        self.0.incarnation = incarnation;
        self
    }

    /// Issued at `wall`, for five minutes.
    pub fn at(mut self, wall: Timestamp) -> Self {
        self.0.iat = wall.as_second();
        self.0.exp = wall.as_second() + 300;
        self
    }

    /// Addressed to the hub named `audience`.
    pub fn audience(mut self, audience: &str) -> Self {
        self.0.aud = audience.into();
        self
    }

    /// Made with config generation `generation`.
    pub fn generation(mut self, generation: u64) -> Self {
        self.0.config_generation = generation;
        self
    }

    /// From an agent reporting every `seconds`.
    pub fn interval(mut self, seconds: u32) -> Self {
        self.0.interval_seconds = seconds;
        self
    }

    /// From the cluster with uid `uid`.
    pub fn uid(mut self, uid: &str) -> Self {
        self.0.cluster_uid = uid.into();
        self
    }

    /// With these check results.
    pub fn checks(mut self, checks: Vec<CheckResult>) -> Self {
        self.0.summary = Summary::of(&checks);
        self.0.checks = checks;
        self
    }

    /// The report, as an agent sends it.
    pub fn build(self) -> HeartbeatReport {
        self.0
    }
}

/// `report` as if it had passed every admission step for `entry`, signed by key `kid`:
/// what [`Fleet::accept`] takes.
pub fn admitted(entry: std::sync::Arc<ClusterEntry>, report: HeartbeatReport) -> Admitted<Report> {
    Admitted {
        entry,
        kid: "kid".into(),
        claims: report.into_shared(),
        signed_checks: None,
        shape: None,
    }
}

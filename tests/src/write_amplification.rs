//! Kubernetes API write amplification of the hub (issue 7): a fleet heart-beating for a
//! simulated stretch of time against a simulated management cluster, counting every write
//! the hub makes to it.
//!
//! The hub's decision code ([`Fleet`]) and its Kubernetes store ([`KubeStore`], the real
//! `kube` client writing to [`KubeSim`]) run unchanged; only the clock is simulated: each
//! step advances the `now`/`wall` the hub is given by one heartbeat interval, every
//! cluster that is up reports (already verified: signatures cost CPU, not writes), the
//! failure detector ticks, and the coarse `lastHeartbeatTime` refresh runs on one slice
//! of the fleet per step, every slice once per `status_refresh`, as the server's
//! background loop does (it uses 60 slices per interval). Outages (a cluster going silent
//! for a while, then coming back) make transitions at a chosen rate.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use serde_json::json;

use fleetpulse_common::api::{ClusterSet, MemberCluster, crds};
use fleetpulse_common::protocol::report::{ClusterId, HeartbeatReport, SCHEMA_VERSION, Summary};
use fleetpulse_hub::fleet::Admitted;
use fleetpulse_hub::fleet::{Fleet, Objects, Settings, shared};
use fleetpulse_hub::kubernetes::store::KubeStore;
use fleetpulse_hub::kubernetes::store::hub_state::StateSettings;
use fleetpulse_hub::store::{Store, StoreWriter};
use fleetpulse_kubesim::KubeSim;

/// What to simulate.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Number of MemberClusters.
    pub clusters: usize,
    /// Simulated duration.
    pub duration: Duration,
    /// Heartbeat interval (and simulation step).
    pub interval: Duration,
    /// Grace period before a silent cluster is unreachable.
    pub grace: Duration,
    /// The coarse status refresh (`--status-refresh-seconds`); zero: off.
    pub status_refresh: Duration,
    /// Outages per cluster per hour (each makes two transitions: down and up).
    pub outages_per_cluster_hour: f64,
    /// How long an outage lasts.
    pub outage: Duration,
    /// ClusterSets, each selecting a slice of the fleet (maxReplicas 3).
    pub cluster_sets: usize,
    /// Simulated time before counting starts: the fleet's first reports (every cluster's
    /// first Reachable/Ready/Healthy, the first selections) are one-off writes of a hub
    /// adopting a fleet, counted apart in [`Counts::warmup`]. No outages start in it.
    pub warmup: Duration,
}

/// What the hub wrote to the management API during the simulation (setup excluded).
#[derive(Clone, Debug, Default)]
pub struct Counts {
    /// `memberclusters/status` patches.
    pub cluster_status: u64,
    /// `clustersets/status` patches.
    pub set_status: u64,
    /// `memberclusters` patches (membership labels).
    pub labels: u64,
    /// Events created or patched.
    pub events: u64,
    /// Hub-state ConfigMap writes (accepted positions and last-heard times, one per
    /// changed shard per flush).
    pub hub_state: u64,
    /// Flushes of the hub state (one per step, as the server flushes every interval).
    pub flushes: u64,
    /// Every write.
    pub total: u64,
    /// Every write during the warm-up.
    pub warmup: u64,
    /// `memberclusters/status` patches for transitions (the rest are the refresh's).
    pub transition_status: u64,
    /// Outages simulated.
    pub outages: u64,
    /// Heartbeats accepted.
    pub heartbeats: u64,
}

/// The management cluster's objects: CRDs, `clusters` MemberClusters in namespace `fleet`
/// labelled `slice=<i % cluster_sets>`, and one ClusterSet per slice.
async fn install(client: &kube::Client, plan: &Plan) -> anyhow::Result<()> {
    for crd in crds::all() {
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd)
            .await?;
    }
    for name in ["fleet", STATE_NAMESPACE] {
        let namespace: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(json!({"metadata": {"name": name}}))?;
        Api::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await?;
    }
    let clusters: Api<MemberCluster> = Api::namespaced(client.clone(), "fleet");
    for i in 0..plan.clusters {
        let mc: MemberCluster = serde_json::from_value(json!({
            "apiVersion": "fleetpulse.io/v1alpha1", "kind": "MemberCluster",
            "metadata": {"name": format!("c{i:05}"), "namespace": "fleet",
                         "labels": {"slice": (i % plan.cluster_sets.max(1)).to_string()}},
            "spec": {"heartbeat": {"intervalSeconds": plan.interval.as_secs(),
                                   "gracePeriodSeconds": plan.grace.as_secs()}}
        }))?;
        clusters.create(&PostParams::default(), &mc).await?;
    }
    let sets: Api<ClusterSet> = Api::all(client.clone());
    for s in 0..plan.cluster_sets {
        let cs: ClusterSet = serde_json::from_value(json!({
            "apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet",
            "metadata": {"name": format!("slice-{s}")},
            "spec": {"clusterSelector": {"matchLabels": {"slice": s.to_string()}}, "maxReplicas": 3}
        }))?;
        sets.create(&PostParams::default(), &cs).await?;
    }
    Ok(())
}

/// Report `seq` of an agent that booted at `booted` (after the hub's start: a Kubernetes-mode
/// hub refuses incarnations from before it).
fn report(
    id: &ClusterId,
    (booted, seq): (Timestamp, u64),
    wall: Timestamp,
    interval: Duration,
) -> HeartbeatReport {
    HeartbeatReport {
        schema_version: SCHEMA_VERSION,
        aud: "fleetpulse".into(),
        cluster: id.clone(),
        cluster_uid: format!("uid-{}", id.name),
        agent_version: "write-amplification".into(),
        incarnation: booted.as_millisecond().unsigned_abs(),
        seq,
        iat: wall.as_second(),
        exp: wall.as_second() + 120,
        interval_seconds: interval.as_secs() as u32,
        config_generation: 1,
        checks: vec![],
        summary: Summary::of(&[]),
    }
}

/// A small deterministic generator (xorshift), so a run is repeatable.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The namespace of the hub-state ConfigMaps.
const STATE_NAMESPACE: &str = "fleetpulse-system";

/// Runs the plan and counts the hub's writes after setup. Needs a multi-threaded runtime
/// (the store's writer thread calls into it).
pub async fn run(plan: &Plan) -> anyhow::Result<Counts> {
    let sim = KubeSim::new();
    let client = sim.client();
    install(&client, plan).await?;
    let setup = sim.total_writes();
    let handle = tokio::runtime::Handle::current();
    let state = StateSettings {
        namespace: STATE_NAMESPACE.into(),
        holder: "write-amplification".into(),
        max_age: plan.interval * 2,
    };
    let mut store = KubeStore::new(client.clone(), handle, None).with_state(state);
    let (store, snapshot) =
        tokio::task::spawn_blocking(move || store.load().map(|s| (store, s))).await??;
    let fleet = Fleet::new(Settings::default(), StoreWriter::spawn(store));
    let (t0, w0) = (Instant::now(), Timestamp::now());
    fleet.restore(snapshot, t0, w0);
    let booted = w0 + SignedDuration::from_millis(1);
    let objects = Objects {
        member_clusters: shared(
            Api::<MemberCluster>::all(client.clone())
                .list(&Default::default())
                .await?
                .items,
        ),
        cluster_sets: shared(
            Api::<ClusterSet>::all(client.clone())
                .list(&Default::default())
                .await?
                .items,
        ),
        ..Default::default()
    };
    let problems = fleet.reload(objects, t0, w0);
    anyhow::ensure!(problems.is_empty(), "conflicting objects: {problems:?}");

    let ids: Vec<ClusterId> = (0..plan.clusters)
        .map(|i| ClusterId::new("fleet", format!("c{i:05}")))
        .collect();
    let warmup_steps = plan.warmup.as_secs() / plan.interval.as_secs();
    let steps = warmup_steps + (plan.duration.as_secs() / plan.interval.as_secs()).max(1);
    let mut counting_from = None;
    let outage_chance = plan.outages_per_cluster_hour * plan.interval.as_secs_f64() / 3600.0;
    let outage_steps = plan.outage.as_secs().div_ceil(plan.interval.as_secs());
    let refresh_every = (plan.status_refresh.as_secs() / plan.interval.as_secs()).max(1);
    let mut down_until = vec![0u64; ids.len()];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut counts = Counts::default();
    for step in 1..=steps {
        if step == warmup_steps + 1 {
            tokio::task::block_in_place(|| fleet.sync());
            counting_from = Some((sim.writes(), fleet.status_writes()));
        }
        let counting = counting_from.is_some();
        let elapsed = plan.interval * step as u32;
        let (now, wall) = (t0 + elapsed, w0 + SignedDuration::try_from(elapsed)?);
        for (i, id) in ids.iter().enumerate() {
            if down_until[i] > step {
                continue;
            }
            if counting && rng.unit() < outage_chance {
                down_until[i] = step + outage_steps;
                counts.outages += 1;
                continue;
            }
            let entry = fleet
                .registry()
                .cluster(id)
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("{id} not in the registry"))?;
            let admitted = Admitted {
                entry,
                kid: "kid".into(),
                claims: report(id, (booted, step), wall, plan.interval).into_shared(),
                signed_checks: None,
                shape: None,
            };
            fleet
                .accept(&admitted, now, wall)
                .map_err(|r| anyhow::anyhow!("{id}: report refused: {r}"))?;
            counts.heartbeats += 1;
        }
        let tick = {
            let fleet = &fleet;
            move || fleet.tick(now, wall)
        };
        tokio::task::block_in_place(tick);
        if !plan.status_refresh.is_zero() {
            // As the server does: one slice of the fleet per step, all slices per interval.
            fleet.refresh_statuses(step % refresh_every, refresh_every);
        }
        // As the server does every --seq-flush-seconds (10 s, one step); waiting for the
        // store, as ten real seconds would, so that flushes are not merged.
        tokio::task::block_in_place(|| fleet.sync());
        if counting {
            counts.flushes += 1;
        }
    }
    tokio::task::block_in_place(|| fleet.sync());
    let (from, transitions_before) = counting_from.unwrap_or_default();
    counts.transition_status = fleet.status_writes() - transitions_before;
    let writes = |resource: &str, verb: &str| {
        let key = (resource.to_owned(), verb.to_owned());
        sim.write_count(resource, verb) - from.get(&key).copied().unwrap_or(0)
    };
    counts.cluster_status = writes("memberclusters/status", "patch");
    counts.set_status = writes("clustersets/status", "patch");
    counts.labels = writes("memberclusters", "patch");
    counts.events = writes("events", "create") + writes("events", "patch");
    counts.hub_state = writes("configmaps", "patch") + writes("configmaps", "delete");
    let from_total: u64 = from.values().sum();
    counts.total = sim.total_writes() - from_total;
    counts.warmup = from_total - setup;
    Ok(counts)
}

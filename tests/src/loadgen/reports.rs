//! Pre-signed heartbeats: every simulated agent's reports for the whole run, built and
//! signed the way the agent does it ([`ReportBuilder`], [`sign_report`]) before the timed
//! phase, so that client-side signing does not compete with the hub for the machine's
//! cores. Only the hub's work is measured.

use k8s_openapi::jiff::Timestamp;

use fleetpulse_agent::report::{ReportBuilder, sign_report};
use fleetpulse_common::api::{CheckKind, CheckPhase};
use fleetpulse_common::checks::RunOutcome;
use fleetpulse_common::checks::timing::{Timing, Tracker};
use fleetpulse_common::protocol::heartbeat_path;
use fleetpulse_common::protocol::report::CheckResult;

use crate::fleet::SimCluster;

/// One simulated agent: where it posts, and its signed reports in sending order.
#[derive(Debug)]
pub struct SimAgent {
    /// The heartbeat path (`/v1/clusters/{namespace}/{name}/heartbeat`).
    pub path: String,
    /// One compact JWS per round, seq 1, 2, ...
    pub reports: Vec<String>,
}

/// What every agent's reports look like.
#[derive(Clone, Debug)]
pub struct ReportPlan {
    /// The hub's audience.
    pub audience: String,
    /// Heartbeat interval, in seconds.
    pub interval_secs: u32,
    /// Reports per agent (rounds).
    pub rounds: usize,
    /// Check results per report (the first two are the built-ins every agent has).
    pub checks: usize,
    /// `iat` of round 0, seconds since the epoch; round `r` is issued `r` intervals later,
    /// when it is sent.
    pub start_unix: i64,
    /// The agents' incarnation (milliseconds since the epoch at "boot").
    pub incarnation: u64,
}

/// The check results an agent with `count` checks, all passing, reports: the API server's
/// `/readyz`, ready nodes, then Lua checks. Built through the agent's own [`Tracker`].
pub fn check_results(count: usize, now: Timestamp) -> Vec<CheckResult> {
    let timing = Timing {
        failure_threshold: 3,
        ..Timing::default()
    };
    (0..count)
        .map(|i| {
            let (name, kind, phase, message) = match i {
                0 => (
                    "apiserver-readyz".to_owned(),
                    CheckKind::ApiServer,
                    CheckPhase::Liveness,
                    "the API server's /readyz answered ok".to_owned(),
                ),
                1 => (
                    "nodes-ready".to_owned(),
                    CheckKind::ReadyNodes,
                    CheckPhase::Readiness,
                    "3 of 3 nodes are Ready (minimum 100%)".to_owned(),
                ),
                _ => (
                    format!("deployments-available-{i}"),
                    CheckKind::Lua,
                    CheckPhase::Liveness,
                    "all 14 Deployments in namespace ingress have their replicas available"
                        .to_owned(),
                ),
            };
            let mut tracker = Tracker::new(&name, kind, phase, timing);
            tracker.record(&RunOutcome::pass(message), now);
            tracker.result()
        })
        .collect()
}

/// A plausible managed-cluster UID (the `kube-system` namespace UID) for cluster `i`.
fn cluster_uid(i: usize) -> String {
    format!("5f0c2a1e-7d3b-4c8e-9a6f-{i:012x}")
}

/// Builds and signs every report of every cluster, on all cores.
pub fn presign(clusters: &[SimCluster], plan: &ReportPlan) -> Vec<SimAgent> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = clusters.len().div_ceil(threads).max(1);
    let since = Timestamp::from_second(plan.start_unix).unwrap_or(Timestamp::UNIX_EPOCH);
    let checks = check_results(plan.checks, since);
    std::thread::scope(|scope| {
        let workers: Vec<_> = clusters
            .chunks(chunk)
            .enumerate()
            .map(|(c, part)| {
                let checks = &checks;
                scope.spawn(move || {
                    part.iter()
                        .enumerate()
                        .map(|(j, cluster)| sign_agent(cluster, c * chunk + j, plan, checks))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a signing thread does not panic"))
            .collect()
    })
}

fn sign_agent(
    cluster: &SimCluster,
    index: usize,
    plan: &ReportPlan,
    checks: &[CheckResult],
) -> SimAgent {
    let mut builder = ReportBuilder::new(
        plan.audience.clone(),
        cluster.id.clone(),
        cluster_uid(index),
        plan.incarnation,
    );
    let reports = (0..plan.rounds)
        .map(|round| {
            let iat = plan.start_unix + round as i64 * i64::from(plan.interval_secs);
            let report = builder.build(iat, plan.interval_secs, 1, checks.to_vec());
            sign_report(&cluster.key, &report)
        })
        .collect();
    SimAgent {
        path: heartbeat_path(&cluster.id.namespace, &cluster.id.name),
        reports,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetpulse_common::protocol::report::{ClusterId, HeartbeatReport};
    use fleetpulse_common::protocol::{TYP_HEARTBEAT, jws, keys};

    #[test]
    fn presigned_reports_verify_and_number_their_rounds() {
        let clusters: Vec<SimCluster> = (1..=3)
            .map(|i| SimCluster {
                id: ClusterId::new("fleet", format!("edge-{i}")),
                key: keys::generate(),
            })
            .collect();
        let plan = ReportPlan {
            audience: "fleetpulse".into(),
            interval_secs: 10,
            rounds: 2,
            checks: 3,
            start_unix: 1_800_000_000,
            incarnation: 7,
        };
        let agents = presign(&clusters, &plan);
        assert_eq!(agents.len(), 3);
        assert_eq!(agents[2].path, "/v1/clusters/fleet/edge-3/heartbeat");
        let payload = jws::parse(&agents[2].reports[1], TYP_HEARTBEAT)
            .unwrap()
            .verify(&clusters[2].key.verifying_key())
            .unwrap();
        let report: HeartbeatReport = serde_json::from_slice(&payload).unwrap();
        report.validate().unwrap();
        assert_eq!((report.seq, report.iat), (2, 1_800_000_010));
        assert_eq!(report.cluster, clusters[2].id);
        assert_eq!(report.checks.len(), 3);
        assert!(report.summary.ready && report.summary.live);
    }
}

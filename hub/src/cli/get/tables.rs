//! The tables `get` prints: health at a glance with since when (and, with `-o wide`, the
//! failing checks and what they said), sets with their selection, the hub's brake, and
//! HealthPolicies.

use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::condition::{self, HEALTHY, REACHABLE, READY};
use fleetpulse_common::api::{HealthPolicy, MemberCluster, SetStatus};

use crate::fleet::read::HubStatus;

/// How long ago `t` was, as kubectl prints ages (`45s`, `3m12s`, `5h`, `2d`).
pub fn age(t: Timestamp, now: Timestamp) -> String {
    let s = (now.as_second() - t.as_second()).max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d", s / 86400),
    }
}

/// Columns padded to their widest cell, three spaces apart, as kubectl prints them.
pub fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("   ").trim_end());
        out.push('\n');
    }
    out
}

/// The MemberCluster table: health at a glance, with since when; `wide` adds every failing
/// check with its message.
pub fn member_cluster_table(items: &[MemberCluster], now: Timestamp, wide: bool) -> String {
    let rows = items
        .iter()
        .map(|mc| {
            let status = mc.status.clone().unwrap_or_default();
            let cond = |t| condition::find(&status.conditions, t);
            let state = |t| cond(t).map_or("Unknown".to_owned(), |c| c.status.clone());
            let healthy = cond(HEALTHY);
            let mut row = vec![
                mc.metadata.namespace.clone().unwrap_or_default(),
                mc.metadata.name.clone().unwrap_or_default(),
                state(REACHABLE),
                state(READY),
                state(HEALTHY),
                healthy.map_or("-".into(), |c| age(c.last_transition_time.0, now)),
                status
                    .last_heartbeat_time
                    .map_or("never".into(), |t| format!("{} ago", age(t.0, now))),
                healthy.map_or(String::new(), |c| c.reason.clone()),
            ];
            if wide {
                row.push(failing_checks(&status.checks));
            }
            row
        })
        .collect();
    let mut header = vec![
        "NAMESPACE",
        "NAME",
        "REACHABLE",
        "READY",
        "HEALTHY",
        "SINCE",
        "LAST HEARTBEAT",
        "REASON",
    ];
    if wide {
        header.push("FAILING CHECKS");
    }
    table(&header, rows)
}

/// `name: message` of every failing check, `;`-separated (`-` when all pass).
pub fn failing_checks(checks: &[fleetpulse_common::api::CheckResult]) -> String {
    let failing: Vec<String> = checks
        .iter()
        .filter(|c| !c.passing)
        .map(|c| {
            let message = c.message.split_whitespace().collect::<Vec<_>>().join(" ");
            if message.is_empty() {
                c.name.clone()
            } else {
                format!("{}: {message}", c.name)
            }
        })
        .collect();
    if failing.is_empty() {
        "-".into()
    } else {
        failing.join("; ")
    }
}

/// The ClusterSet/Set table: what is selected, whether that is enough, and the last
/// failover.
pub fn set_table<'a>(
    rows: impl Iterator<Item = (Option<&'a str>, Option<&'a str>, u32, Option<&'a SetStatus>)>,
    now: Timestamp,
) -> String {
    let rows = rows
        .map(|(ns, name, max, status)| {
            let status = status.cloned().unwrap_or_default();
            let selected: Vec<&str> = status
                .selected_cluster_refs
                .iter()
                .map(|r| r.name.as_str())
                .collect();
            let cond = |t| {
                condition::find(&status.conditions, t)
                    .map_or("Unknown".to_owned(), |c| c.status.clone())
            };
            vec![
                ns.unwrap_or("-").to_owned(),
                name.unwrap_or_default().to_owned(),
                max.to_string(),
                if selected.is_empty() {
                    "<none>".into()
                } else {
                    selected.join(",")
                },
                cond("Satisfied"),
                cond("ReassignmentFrozen"),
                status
                    .last_failover_time
                    .map_or("never".into(), |t| format!("{} ago", age(t.0, now))),
            ]
        })
        .collect();
    table(
        &[
            "NAMESPACE",
            "NAME",
            "MAX",
            "SELECTED",
            "SATISFIED",
            "FROZEN",
            "LAST FAILOVER",
        ],
        rows,
    )
}

/// The hub's own state: clusters, sets, the partition brake.
pub fn hub_table(status: &HubStatus, now: Timestamp) -> String {
    let brake = &status.partition_brake;
    let since = brake
        .since
        .as_ref()
        .map_or("-".into(), |t| format!("{} ago", age(t.0, now)));
    let rows = vec![vec![
        status.clusters.to_string(),
        status.sets.to_string(),
        brake.state.clone(),
        since,
        brake.message.clone(),
    ]];
    table(
        &["CLUSTERS", "SETS", "PARTITION BRAKE", "SINCE", "MESSAGE"],
        rows,
    )
}

/// HealthPolicies: how many checks, how many clusters they reach, accepted or not.
pub fn policy_table(items: &[HealthPolicy]) -> String {
    let rows = items
        .iter()
        .map(|p| {
            let status = p.status.clone().unwrap_or_default();
            let accepted = condition::find(&status.conditions, condition::ACCEPTED);
            vec![
                p.metadata.namespace.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default(),
                p.spec.readiness_checks.len().to_string(),
                p.spec.liveness_checks.len().to_string(),
                status.matched_clusters.to_string(),
                accepted.map_or("Unknown".into(), |c| c.status.clone()),
                accepted.map_or(String::new(), |c| c.message.clone()),
            ]
        })
        .collect();
    table(
        &[
            "NAMESPACE",
            "NAME",
            "READINESS CHECKS",
            "LIVENESS CHECKS",
            "CLUSTERS",
            "ACCEPTED",
            "MESSAGE",
        ],
        rows,
    )
}

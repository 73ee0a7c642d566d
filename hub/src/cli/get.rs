//! `fleetpulse-hub get`: reads the hub's read API and prints a table that answers "which
//! clusters are healthy, and since when", or the objects as JSON/YAML.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use k8s_openapi::jiff::Timestamp;
use rustls::pki_types::pem::PemObject;
use serde::de::DeserializeOwned;

use fleetpulse_common::api::condition::{self, HEALTHY, REACHABLE, READY};
use fleetpulse_common::api::{ClusterSet, HealthPolicy, MemberCluster, Set, SetStatus};

use crate::fleet::sets::HubStatus;
use crate::ingest::read::List;

/// `get` flags.
#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// What to list.
    #[arg(value_enum)]
    pub kind: Kind,
    /// Output format.
    #[arg(short, long, default_value = "table", value_parser = ["table", "json", "yaml"])]
    pub output: String,
    /// The hub's URL.
    #[arg(
        long,
        env = "FLEETPULSE_SERVER",
        default_value = "https://127.0.0.1:8443"
    )]
    pub server: String,
    /// PEM CA bundle to verify the hub's certificate (default: the system roots).
    #[arg(long, env = "FLEETPULSE_CA")]
    pub ca: Option<PathBuf>,
    /// Only this namespace.
    #[arg(short, long)]
    pub namespace: Option<String>,
}

/// Listable kinds.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Kind {
    /// MemberClusters.
    #[value(alias = "mc", alias = "membercluster")]
    Memberclusters,
    /// ClusterSets.
    #[value(alias = "clusterset", alias = "cset")]
    Clustersets,
    /// Sets.
    #[value(alias = "set")]
    Sets,
    /// HealthPolicies.
    #[value(alias = "healthpolicy", alias = "hp")]
    Healthpolicies,
    /// The hub itself (the partition brake).
    Hub,
}

/// Runs `get`.
pub async fn run(args: GetArgs) -> anyhow::Result<()> {
    let client = client(args.ca.as_deref())?;
    let path = match args.kind {
        Kind::Memberclusters => "memberclusters",
        Kind::Clustersets => "clustersets",
        Kind::Sets => "sets",
        Kind::Healthpolicies => "healthpolicies",
        Kind::Hub => "hub",
    };
    let mut url = format!("{}/v1/{path}", args.server.trim_end_matches('/'));
    if let Some(ns) = &args.namespace {
        url.push_str(&format!("?namespace={ns}"));
    }
    let response = client
        .get(&url)
        .send()
        .await
        .with_context(|| format!("cannot reach the hub at {url}"))?;
    let status = response.status();
    let body = response.text().await?;
    anyhow::ensure!(
        status.is_success(),
        "hub answered {status} for {url}: {body}"
    );
    let value: serde_json::Value = serde_json::from_str(&body).context("hub answer is not JSON")?;
    let now = Timestamp::now();
    let out = match args.output.as_str() {
        "json" => serde_json::to_string_pretty(&value)? + "\n",
        "yaml" => serde_yaml_ng::to_string(&value)?,
        _ => match args.kind {
            Kind::Memberclusters => member_cluster_table(&items::<MemberCluster>(value)?, now),
            Kind::Clustersets => {
                let rows = items::<ClusterSet>(value)?;
                set_table(
                    rows.iter().map(|s| {
                        (
                            None,
                            s.metadata.name.as_deref(),
                            s.spec.set.max_replicas,
                            s.status.as_ref(),
                        )
                    }),
                    now,
                )
            }
            Kind::Sets => {
                let rows = items::<Set>(value)?;
                set_table(
                    rows.iter().map(|s| {
                        (
                            s.metadata.namespace.as_deref(),
                            s.metadata.name.as_deref(),
                            s.spec.max_replicas,
                            s.status.as_ref(),
                        )
                    }),
                    now,
                )
            }
            Kind::Healthpolicies => policy_table(&items::<HealthPolicy>(value)?),
            Kind::Hub => hub_table(
                &serde_json::from_value(value).context("hub answer is not a hub status")?,
                now,
            ),
        },
    };
    print!("{out}");
    Ok(())
}

fn items<T: DeserializeOwned>(value: serde_json::Value) -> anyhow::Result<Vec<T>> {
    Ok(serde_json::from_value::<List<T>>(value)
        .context("hub answer is not a list of the expected kind")?
        .items)
}

fn client(ca: Option<&std::path::Path>) -> anyhow::Result<reqwest::Client> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            let pem = std::fs::read(path)
                .with_context(|| format!("cannot read CA bundle {}", path.display()))?;
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
                roots.add(
                    cert.with_context(|| format!("{} is not a PEM CA bundle", path.display()))?,
                )?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()?)
}

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

fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
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

/// The MemberCluster table: health at a glance, with since when.
pub fn member_cluster_table(items: &[MemberCluster], now: Timestamp) -> String {
    let rows = items
        .iter()
        .map(|mc| {
            let status = mc.status.clone().unwrap_or_default();
            let cond = |t| condition::find(&status.conditions, t);
            let state = |t| cond(t).map_or("Unknown".to_owned(), |c| c.status.clone());
            let healthy = cond(HEALTHY);
            vec![
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
            ]
        })
        .collect();
    table(
        &[
            "NAMESPACE",
            "NAME",
            "REACHABLE",
            "READY",
            "HEALTHY",
            "SINCE",
            "LAST HEARTBEAT",
            "REASON",
        ],
        rows,
    )
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

fn hub_table(status: &HubStatus, now: Timestamp) -> String {
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

fn policy_table(items: &[HealthPolicy]) -> String {
    let rows = items
        .iter()
        .map(|p| {
            vec![
                p.metadata.namespace.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default(),
                p.spec.readiness_checks.len().to_string(),
                p.spec.liveness_checks.len().to_string(),
            ]
        })
        .collect();
    table(
        &["NAMESPACE", "NAME", "READINESS CHECKS", "LIVENESS CHECKS"],
        rows,
    )
}

#[cfg(test)]
mod tests;

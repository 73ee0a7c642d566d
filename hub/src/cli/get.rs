//! `fleetpulse-hub get`: reads the hub's read API and prints a table that answers "which
//! clusters are healthy, and since when" (with `-o wide`, which checks fail and what they
//! say), or the objects as JSON/YAML.

mod tables;

use anyhow::Context;
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::{ClusterSet, HealthPolicy, MemberCluster, Set};

use super::hub_api::{ServerArgs, items};
pub use tables::{age, failing_checks, member_cluster_table, set_table, table};

/// `get` flags.
#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// What to list.
    #[arg(value_enum)]
    pub kind: Kind,
    /// Output format: `table`, `wide` (adds the failing checks and their messages), `json`
    /// or `yaml`.
    #[arg(short, long, default_value = "table", value_parser = ["table", "wide", "json", "yaml"])]
    pub output: String,
    /// Where the hub is.
    #[command(flatten)]
    pub server: ServerArgs,
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
    let path = match args.kind {
        Kind::Memberclusters => "memberclusters",
        Kind::Clustersets => "clustersets",
        Kind::Sets => "sets",
        Kind::Healthpolicies => "healthpolicies",
        Kind::Hub => "hub",
    };
    let mut path = format!("/v1/{path}");
    if let Some(ns) = &args.namespace {
        path.push_str(&format!("?namespace={ns}"));
    }
    let value = args.server.get(&path).await?;
    let now = Timestamp::now();
    let wide = args.output == "wide";
    let out = match args.output.as_str() {
        "json" => serde_json::to_string_pretty(&value)? + "\n",
        "yaml" => serde_yaml_ng::to_string(&value)?,
        _ => match args.kind {
            Kind::Memberclusters => {
                member_cluster_table(&items::<MemberCluster>(value)?, now, wide)
            }
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
            Kind::Healthpolicies => tables::policy_table(&items::<HealthPolicy>(value)?),
            Kind::Hub => tables::hub_table(
                &serde_json::from_value(value).context("hub answer is not a hub status")?,
                now,
            ),
        },
    };
    fleetpulse_common::cli::print(&out)
}

#[cfg(test)]
mod tests;

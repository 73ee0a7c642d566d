//! `fleetpulse-hub describe membercluster NAMESPACE/NAME`: one cluster in full, as
//! `kubectl describe` shows an object: its conditions, every check with its message, the
//! keys that may sign its reports, the sets that match and select it, and its recent
//! condition transitions, read from the hub's read API.

use anyhow::Context;
use k8s_openapi::jiff::Timestamp;

use fleetpulse_common::api::{ClusterRef, ClusterSet, MemberCluster, Set, SetStatus};
use fleetpulse_common::protocol::keys::{self, KeyId};
use fleetpulse_common::protocol::report::ClusterId;

use super::get::{age, table};
use super::hub_api::{ServerArgs, items};
use crate::fleet::transitions::Transition;

/// `describe` flags.
#[derive(Debug, clap::Args)]
pub struct DescribeArgs {
    /// What to describe.
    #[arg(value_enum)]
    pub kind: DescribeKind,
    /// The object, as `NAMESPACE/NAME`.
    #[arg(value_name = "NAMESPACE/NAME", value_parser = ClusterId::parse)]
    pub name: ClusterId,
    /// Where the hub is.
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Describable kinds.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum DescribeKind {
    /// A MemberCluster.
    #[value(alias = "mc", alias = "memberclusters")]
    Membercluster,
}

/// Everything `describe` shows about one cluster.
pub struct Described {
    /// The cluster with its status.
    pub cluster: MemberCluster,
    /// Every ClusterSet.
    pub cluster_sets: Vec<ClusterSet>,
    /// The Sets of the cluster's namespace.
    pub sets: Vec<Set>,
    /// Its recent condition transitions, oldest first.
    pub transitions: Vec<Transition>,
}

/// Runs `describe`.
pub async fn run(args: DescribeArgs) -> anyhow::Result<()> {
    let DescribeKind::Membercluster = args.kind;
    let id = &args.name;
    let server = &args.server;
    let clusters: Vec<MemberCluster> = items(
        server
            .get(&format!("/v1/memberclusters?namespace={}", id.namespace))
            .await?,
    )?;
    let cluster = clusters
        .into_iter()
        .find(|mc| mc.metadata.name.as_deref() == Some(id.name.as_str()))
        .with_context(|| {
            format!(
                "MemberCluster {id} is not known to the hub at {}; list the known ones with \
                 `fleetpulse-hub get memberclusters`",
                server.server
            )
        })?;
    let described = Described {
        cluster,
        cluster_sets: items(server.get("/v1/clustersets").await?)?,
        sets: items(
            server
                .get(&format!("/v1/sets?namespace={}", id.namespace))
                .await?,
        )?,
        transitions: items(
            server
                .get(&format!(
                    "/v1/memberclusters/{}/{}/transitions",
                    id.namespace, id.name
                ))
                .await?,
        )?,
    };
    fleetpulse_common::cli::print(&render(&described, Timestamp::now()))
}

fn indented(block: &str) -> String {
    block.lines().map(|l| format!("  {l}\n")).collect()
}

fn section(out: &mut String, title: &str, header: &[&str], rows: Vec<Vec<String>>) {
    out.push_str(&format!("\n{title}:\n"));
    if rows.is_empty() {
        out.push_str("  <none>\n");
    } else {
        out.push_str(&indented(&table(header, rows)));
    }
}

fn refers_to(refs: &[ClusterRef], id: &ClusterId, default_namespace: &str) -> bool {
    refs.iter().any(|r| {
        r.name == id.name && r.namespace.as_deref().unwrap_or(default_namespace) == id.namespace
    })
}

fn yes(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// The description, as `describe` prints it at `now`.
pub fn render(d: &Described, now: Timestamp) -> String {
    let mc = &d.cluster;
    let id = ClusterId::new(
        mc.metadata.namespace.clone().unwrap_or_default(),
        mc.metadata.name.clone().unwrap_or_default(),
    );
    let status = mc.status.clone().unwrap_or_default();
    let field = |name: &str, value: String| format!("{:<18}{value}\n", format!("{name}:"));
    let mut out = field("Name", id.name.clone());
    out += &field("Namespace", id.namespace.clone());
    let labels: Vec<String> = (mc.metadata.labels.iter().flatten())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    out += &field(
        "Labels",
        if labels.is_empty() {
            "<none>".into()
        } else {
            labels.join(&format!("\n{:18}", ""))
        },
    );
    let hb = &mc.spec.heartbeat;
    out += &field(
        "Heartbeat",
        format!(
            "every {}s, unreachable after {}s of silence{}",
            hb.interval_seconds,
            hb.grace_period_seconds,
            if mc.spec.paused {
                " (paused: conditions frozen)"
            } else {
                ""
            }
        ),
    );
    out += &field(
        "Last heartbeat",
        status
            .last_heartbeat_time
            .as_ref()
            .map_or("never".into(), |t| {
                format!("{} ago ({})", age(t.0, now), t.0)
            }),
    );
    out += &field(
        "Agent",
        status.agent.as_ref().map_or("<none reported>".into(), |a| {
            format!(
                "version {}, cluster UID {}, incarnation {}",
                a.version,
                if a.cluster_uid.is_empty() {
                    "-"
                } else {
                    &a.cluster_uid
                },
                a.incarnation
            )
        }),
    );
    let since = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map_or("-".into(), |t| age(t.0, now))
    };
    let conditions = status.conditions.iter().map(|c| {
        vec![
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone(),
            since(Some(&c.last_transition_time)),
            c.message.clone(),
        ]
    });
    section(
        &mut out,
        "Conditions",
        &["TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"],
        conditions.collect(),
    );
    let checks = status.checks.iter().map(|c| {
        vec![
            c.name.clone(),
            serde_json::to_value(c.phase)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            serde_json::to_value(c.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            if c.passing { "True" } else { "False" }.into(),
            since(c.since.as_ref()),
            c.consecutive_failures.to_string(),
            c.success_rate_percent
                .map_or("-".into(), |r| format!("{r:.0}%")),
            c.message.split_whitespace().collect::<Vec<_>>().join(" "),
        ]
    });
    section(
        &mut out,
        "Checks",
        &[
            "NAME", "PHASE", "KIND", "PASSING", "SINCE", "FAILURES", "SUCCESS", "MESSAGE",
        ],
        checks.collect(),
    );
    let signing = status.agent.as_ref().map(|a| a.key_id.as_str());
    let keys = mc.spec.agent.public_keys.iter().map(|k| {
        let kid = keys::parse_public_key(&k.public_key)
            .map_or_else(|e| format!("<unreadable: {e}>"), |key| KeyId::of(&key).0);
        let state = if k.revoked { "revoked" } else { "accepted" };
        let last = yes(signing == Some(kid.as_str()));
        vec![kid, state.into(), last]
    });
    section(
        &mut out,
        "Keys",
        &["KEY ID", "STATE", "SIGNED LAST REPORT"],
        keys.collect(),
    );
    let set_row = |kind: &str, name: Option<&str>, s: Option<&SetStatus>, ns: &str| {
        let s = s.cloned().unwrap_or_default();
        let matching = refers_to(&s.matching_cluster_refs, &id, ns);
        let selected = refers_to(&s.selected_cluster_refs, &id, ns);
        (matching || selected).then(|| {
            vec![
                kind.into(),
                name.unwrap_or_default().into(),
                yes(matching),
                yes(selected),
            ]
        })
    };
    let sets = (d.cluster_sets.iter())
        .filter_map(|cs| {
            set_row(
                "ClusterSet",
                cs.metadata.name.as_deref(),
                cs.status.as_ref(),
                "default",
            )
        })
        .chain(d.sets.iter().filter_map(|s| {
            set_row(
                "Set",
                s.metadata.name.as_deref(),
                s.status.as_ref(),
                &id.namespace,
            )
        }));
    section(
        &mut out,
        "Sets",
        &["KIND", "NAME", "MATCHING", "SELECTED"],
        sets.collect(),
    );
    if !status.mirrors.is_empty() {
        let mirrors = status.mirrors.iter().map(|m| {
            let labels: Vec<String> = m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            vec![
                m.object.clone(),
                format!("{:?}", m.state),
                labels.join(","),
                m.taint.clone().unwrap_or_else(|| "-".into()),
                m.writes.to_string(),
                m.message.clone(),
            ]
        });
        section(
            &mut out,
            "Mirrors",
            &["OBJECT", "STATE", "LABELS", "TAINT", "WRITES", "MESSAGE"],
            mirrors.collect(),
        );
    }
    let transitions = d.transitions.iter().rev().map(|t| {
        vec![
            format!("{} ago", age(t.at.0, now)),
            t.condition.clone(),
            format!("{} -> {}", t.from.as_deref().unwrap_or("-"), t.to),
            t.reason.clone(),
            t.message.clone(),
        ]
    });
    section(
        &mut out,
        "Recent transitions (newest first, since this hub started)",
        &["WHEN", "CONDITION", "CHANGE", "REASON", "MESSAGE"],
        transitions.collect(),
    );
    out
}

#[cfg(test)]
mod tests;

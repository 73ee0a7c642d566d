//! `fleetpulse-agent eval`: evaluates the checks of a MemberCluster manifest against
//! objects from a file, with no cluster. Exit status: 0 when every evaluated check passes,
//! 1 when any fails, 2 on a usage or input error.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::Deserialize;
use serde_json::Value;

use fleetpulse_common::api::MemberCluster;
use fleetpulse_common::api::schema::check_object;
use fleetpulse_common::checks::model::Check;
use fleetpulse_common::lua::LuaLimits;

use crate::checks::offline::{self, Evaluated};

/// Flags of `eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// A MemberCluster manifest: its checks are evaluated, its metadata feeds the templates.
    #[arg(long, value_name = "FILE", env = "FLEETPULSE_EVAL_CLUSTER")]
    pub cluster: PathBuf,
    /// Objects the checks read: multi-document YAML, or a `List` (JSON or YAML).
    #[arg(long, value_name = "FILE", env = "FLEETPULSE_EVAL_RESOURCES")]
    pub resources: PathBuf,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Table, env = "FLEETPULSE_EVAL_OUTPUT")]
    pub output: Output,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// A table.
    Table,
    /// `{"checks": [...]}`.
    Json,
}

/// Runs `eval`, printing results, and returns the exit status.
pub async fn run(args: EvalArgs) -> i32 {
    let (cluster, checks, objects) = match load(&args.cluster, &args.resources) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let limits = LuaLimits::default();
    let results = offline::evaluate(&cluster.metadata, &checks, objects, limits).await;
    match args.output {
        Output::Json => println!("{}", serde_json::json!({ "checks": results })),
        Output::Table => print!("{}", table(&results)),
    }
    if results.iter().any(|r| r.passing == Some(false)) {
        1
    } else {
        0
    }
}

/// The MemberCluster, its checks (parsed as the hub parses them) and the objects.
type Loaded = (MemberCluster, Vec<Check>, Vec<Value>);

fn load(cluster: &Path, resources: &Path) -> Result<Loaded, String> {
    let docs = documents(cluster)?;
    let [doc] = docs.as_slice() else {
        return Err(format!(
            "{}: expected one MemberCluster, found {} documents",
            cluster.display(),
            docs.len()
        ));
    };
    if let Err(problems) = check_object("MemberCluster", doc) {
        let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
        return Err(format!(
            "{}: the MemberCluster does not match its schema (the hub would refuse it): {}",
            cluster.display(),
            listed.join("; ")
        ));
    }
    let mut mc: MemberCluster = serde_json::from_value(doc.clone())
        .map_err(|e| format!("{}: not a MemberCluster: {e}", cluster.display()))?;
    mc.metadata
        .namespace
        .get_or_insert_with(|| "default".into());
    let checks = mc.spec.checks().map_err(|e| {
        format!(
            "{}: MemberCluster {}: {e}",
            cluster.display(),
            mc.metadata.name.as_deref().unwrap_or("?")
        )
    })?;
    let mut objects = Vec::new();
    for doc in documents(resources)? {
        match doc.get("items").and_then(Value::as_array) {
            Some(items) if doc["kind"].as_str().is_some_and(|k| k.ends_with("List")) => {
                objects.extend(items.iter().cloned())
            }
            _ => objects.push(doc),
        }
    }
    Ok((mc, checks, objects))
}

/// Every non-empty YAML (or JSON) document of a file.
fn documents(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut docs = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
        let value = Value::deserialize(doc).map_err(|e| {
            format!(
                "{} (document {}): not valid YAML: {e}",
                path.display(),
                i + 1
            )
        })?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

fn table(results: &[Evaluated]) -> String {
    let mut out = String::from("LIST        NAME                 RESULT   MESSAGE\n");
    for r in results {
        let verdict = match r.passing {
            Some(true) => "pass",
            Some(false) => "FAIL",
            None => "skipped",
        };
        out.push_str(&format!(
            "{:<11} {:<20} {:<8} {}\n",
            r.list, r.name, verdict, r.message
        ));
    }
    out
}

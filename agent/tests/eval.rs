//! `fleetpulse-agent eval`, as an operator uses it to try a check before rolling it out:
//! a Sveltos readiness check pasted unchanged, and the seed proposal's per-cluster
//! KeptnMetric check, against objects from files.

use std::process::{Command, Output};

fn eval(cluster: &str, resources: &str, json: bool) -> Output {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleetpulse-agent"));
    cmd.arg("eval")
        .arg("--cluster")
        .arg(format!("{fixtures}/{cluster}"))
        .arg("--resources")
        .arg(format!("{fixtures}/{resources}"));
    if json {
        cmd.args(["-o", "json"]);
    }
    cmd.output().unwrap()
}

fn checks(out: &Output) -> Vec<serde_json::Value> {
    let value: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    value["checks"].as_array().unwrap().clone()
}

#[test]
fn a_sveltos_readiness_check_runs_unchanged() {
    let pass = eval("sveltos-cluster.yaml", "nodes-with-worker.yaml", true);
    assert_eq!(
        pass.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&pass.stderr)
    );
    let results = checks(&pass);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["name"], "worker-node-check");
    assert_eq!(results[0]["list"], "readiness");
    assert_eq!(results[0]["passing"], true);

    let fail = eval(
        "sveltos-cluster.yaml",
        "nodes-control-plane-only.yaml",
        true,
    );
    assert_eq!(fail.status.code(), Some(1));
    assert_eq!(checks(&fail)[0]["passing"], false);
}

#[test]
fn the_keptn_metric_check_reads_only_its_own_clusters_metric() {
    let edge1 = eval("keptn-edge-1.yaml", "keptn-metrics.yaml", true);
    assert_eq!(
        edge1.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&edge1.stderr)
    );
    assert_eq!(checks(&edge1)[0]["message"], "error rate 0.01");
    let edge2 = eval("keptn-edge-2.yaml", "keptn-metrics.yaml", true);
    assert_eq!(edge2.status.code(), Some(1));
    let result = &checks(&edge2)[0];
    assert_eq!(
        result["message"], "error rate 0.9",
        "edge-2 reads its own metric, not edge-1's"
    );
    assert_eq!(result["list"], "liveness");
}

#[test]
fn the_table_names_each_check_and_its_verdict() {
    let out = eval(
        "sveltos-cluster.yaml",
        "nodes-control-plane-only.yaml",
        false,
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let row = table.lines().find(|l| l.contains("worker-node")).unwrap();
    assert!(
        row.starts_with("readiness") && row.contains("FAIL"),
        "{table}"
    );
}

#[test]
fn unreadable_input_exits_2_with_the_file_named() {
    let out = eval("missing.yaml", "keptn-metrics.yaml", true);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("missing.yaml"), "{stderr}");
    let not_a_cluster = eval("keptn-metrics.yaml", "keptn-metrics.yaml", true);
    assert_eq!(not_a_cluster.status.code(), Some(2));
}

#[test]
fn sveltos_and_argo_cd_constructs_evaluate_as_in_their_projects() {
    let out = eval("compat-cluster.yaml", "compat-objects.yaml", true);
    let results = checks(&out);
    // The LabelSelector form selects the two workers; `goto` and modifying the objects
    // work; managedFields is never visible, offline as live.
    assert_eq!(results[0]["name"], "web-workers");
    assert_eq!(results[0]["passing"], true, "{results:?}");
    assert_eq!(results[0]["message"], "worker-1,worker-2");
    // The CEL filter keeps the prod Deployments; the health script fails on the first one
    // that is not Healthy and names it.
    assert_eq!(results[1]["name"], "deployments-healthy");
    assert_eq!(results[1]["passing"], false);
    assert_eq!(
        results[1]["message"],
        "Deployment prod/api is Progressing: 1 of 2 replicas available"
    );
    assert_eq!(out.status.code(), Some(1));
}

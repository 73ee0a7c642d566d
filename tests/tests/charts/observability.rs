//! The hub chart's Grafana dashboard and alert rules query only metrics a real hub and agent
//! expose, docs/metrics.md lists exactly those, and the chart ships both objects as the
//! values ask.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use fleetpulse_tests::embedded_hub::EmbeddedHub;
use fleetpulse_tests::pki::Pki;
use fleetpulse_tests::process::{self, Running};
use fleetpulse_tests::wait;

use super::tools::{Chart, documents, one, render, repo_root, strings};

/// Every `fleetpulse_...` name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("fleetpulse_") {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if !tail[..end].ends_with('_') {
            names.insert(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    names
}

/// The sample names a scrape exposes: every sample's, and for each family its name with
/// the suffixes its type gives its samples (so a counter no one has counted yet counts).
fn exposed(scrape: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in scrape.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let mut parts = declared.split_whitespace();
            let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                continue;
            };
            names.insert(name.to_owned());
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        } else if !line.starts_with('#') {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_owned());
        }
    }
    names
}

/// Every `expr` string anywhere in a JSON value.
fn exprs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("expr", Value::String(expr)) => out.push(expr.clone()),
                    _ => exprs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

fn dashboard() -> Value {
    let path = repo_root().join("charts/fleetpulse-hub/dashboards/fleetpulse.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The rules' expressions, with per-cluster metrics on and off.
fn rule_exprs() -> Vec<String> {
    let mut out = Vec::new();
    for per_cluster in ["true", "false"] {
        let docs = documents(&render(
            Chart::Hub,
            &strings(&[
                "--set",
                "metrics.prometheusRule.enabled=true",
                "--set",
                &format!("metrics.perCluster={per_cluster}"),
            ]),
        ));
        exprs(one(&docs, "PrometheusRule"), &mut out);
    }
    out
}

#[test]
fn the_dashboard_ships_as_a_labelled_config_map_and_every_alert_has_its_own_switch() {
    let docs = documents(&render(
        Chart::Hub,
        &strings(&["--set", "metrics.dashboard.enabled=true"]),
    ));
    let map = one(&docs, "ConfigMap");
    assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
    let shipped: Value =
        serde_json::from_str(map["data"]["fleetpulse.json"].as_str().unwrap()).unwrap();
    assert_eq!(shipped, dashboard());

    let alerts = |extra: &[&str]| -> Vec<String> {
        let mut args = strings(&["--set", "metrics.prometheusRule.enabled=true"]);
        args.extend(strings(extra));
        let docs = documents(&render(Chart::Hub, &args));
        one(&docs, "PrometheusRule")["spec"]["groups"][0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["alert"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = [
        "ClusterUnreachable",
        "ClusterUnhealthy",
        "SetUnsatisfied",
        "PartitionBrakeEngaged",
        "ReportsRejected",
        "HubHasNoLeader",
    ];
    assert_eq!(alerts(&[]), all);
    for name in all {
        let off = format!("metrics.prometheusRule.alerts.{name}.enabled=false");
        let left = alerts(&["--set", &off]);
        assert!(
            !left.iter().any(|a| a == name) && left.len() == all.len() - 1,
            "{left:?}"
        );
    }
    let defaults = documents(&render(Chart::Hub, &[]));
    for kind in ["ConfigMap", "PrometheusRule"] {
        assert!(
            !defaults.iter().any(|d| d["kind"] == kind),
            "{kind} rendered by default"
        );
    }
}

/// Starts an embedded hub (per-cluster metrics on) with one MemberCluster, whose single
/// check is a TCP probe of `probe_port`, and a ClusterSet; then an agent with `--listen`.
/// Returns both scrapes once the agent is ready and has run its check.
async fn scrape_running_hub_and_agent(dir: &std::path::Path, probe_port: u16) -> (String, String) {
    let path = |p: &str| dir.join(p).display().to_string();
    let pki = Pki::generate(dir).unwrap();
    let keygen = process::run("fleetpulse-agent", &["keygen", "--out", &path("edge.pem")]).unwrap();
    let printed = String::from_utf8(keygen.stdout).unwrap();
    let public_key = printed
        .lines()
        .find_map(|l| l.strip_prefix("public key:"))
        .map(str::trim)
        .unwrap()
        .to_owned();
    std::fs::create_dir_all(path("manifests")).unwrap();
    std::fs::write(
        path("manifests/fleet.yaml"),
        format!(
            "apiVersion: fleetpulse.io/v1alpha1\nkind: MemberCluster\nmetadata: {{name: edge, namespace: fleet}}\n\
             spec:\n  heartbeat: {{intervalSeconds: 1, gracePeriodSeconds: 5}}\n  agent:\n    publicKeys:\n      - publicKey: {public_key}\n\
             \x20 livenessChecks:\n    - name: probe\n      tcp: {{host: 127.0.0.1, port: {probe_port}}}\n\
             ---\napiVersion: fleetpulse.io/v1alpha1\nkind: ClusterSet\nmetadata: {{name: prod}}\nspec:\n  clusterRefs: [{{namespace: fleet, name: edge}}]\n  maxReplicas: 1\n"
        ),
    )
    .unwrap();
    let (manifests, data) = (dir.join("manifests"), dir.join("data"));
    let hub = tokio::task::spawn_blocking(move || {
        EmbeddedHub::spawn(&manifests, &data, &pki, &["--per-cluster-metrics"])
    })
    .await
    .unwrap()
    .unwrap();
    let (server, admin, ca) = (hub.server.clone(), hub.admin.clone(), hub.ca.clone());
    let agent_args = [
        "run",
        "--hub",
        &server,
        "--cluster",
        "fleet/edge",
        "--key-file",
        &path("edge.pem"),
        "--hub-ca",
        &ca,
        "--interval-seconds",
        "1",
        "--listen",
        "127.0.0.1:0",
    ];
    let agent = Running::spawn_logged("fleetpulse-agent", "agent", &agent_args).unwrap();
    let (agent_addr, _) =
        wait::until_some("the agent to listen", Duration::from_secs(30), || async {
            agent.logged_addr("listening")
        })
        .await
        .unwrap();
    // A second agent with a key the MemberCluster does not list: the hub rejects its
    // reports (unknown_key), so the rejection and failure counters have series.
    process::run(
        "fleetpulse-agent",
        &["keygen", "--out", &path("stranger.pem")],
    )
    .unwrap();
    let stranger_key = path("stranger.pem");
    let mut stranger_args = agent_args;
    stranger_args[6] = &stranger_key;
    let stranger = Running::spawn_logged("fleetpulse-agent", "stranger", &stranger_args).unwrap();
    let (stranger_addr, _) = wait::until_some(
        "the stranger to listen",
        Duration::from_secs(30),
        || async { stranger.logged_addr("listening") },
    )
    .await
    .unwrap();

    let tls = fleetpulse_agent::tls::client_config(Some(&std::fs::read(&ca).unwrap())).unwrap();
    let http = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let get = |url: String| {
        let http = http.clone();
        async move {
            let response = http.get(url).send().await.ok()?;
            response.status().is_success().then_some(())?;
            response.text().await.ok()
        }
    };
    let agent_base = format!("http://{agent_addr}");
    wait::until_some("the agent ready", Duration::from_secs(60), || {
        get(format!("{agent_base}/readyz"))
    })
    .await
    .unwrap();
    let (agent_scrape, _) = wait::until_some(
        "the agent's check metrics",
        Duration::from_secs(60),
        || async {
            let text = get(format!("{agent_base}/metrics")).await?;
            text.contains("fleetpulse_agent_check_duration_seconds{check=\"probe\"}")
                .then_some(text)
        },
    )
    .await
    .unwrap();
    let (stranger_scrape, _) = wait::until_some(
        "the stranger's failures",
        Duration::from_secs(60),
        || async {
            let text = get(format!("http://{stranger_addr}/metrics")).await?;
            let failed = "fleetpulse_agent_heartbeats_failed_total{reason=\"unknown_key\"}";
            text.contains(failed).then_some(text)
        },
    )
    .await
    .unwrap();
    let (hub_scrape, _) =
        wait::until_some("the hub's set metrics", Duration::from_secs(60), || async {
            let text = get(format!("{admin}/metrics")).await?;
            let selected =
                "fleetpulse_hub_set_selected_clusters{kind=\"ClusterSet\",set=\"prod\"} 1";
            let rejected = "fleetpulse_hub_rejected_reports_total{code=\"unknown_key\"";
            (text.contains(selected) && text.contains(rejected)).then_some(text)
        })
        .await
        .unwrap();
    (hub_scrape, format!("{agent_scrape}\n{stranger_scrape}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_metric_the_dashboard_the_rules_and_the_docs_name_is_exposed_by_a_running_hub_or_agent()
 {
    let dir = tempfile::tempdir().unwrap();
    let probed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probed.local_addr().unwrap().port();
    let (hub, agent) = scrape_running_hub_and_agent(dir.path(), port).await;
    let mut available = exposed(&hub);
    available.extend(exposed(&agent));
    // A labelled family has no series (and no TYPE line) until its first sample. Failovers
    // need a second eligible cluster and a toleration to run out; the hub's
    // `every_metric_is_exposed_with_its_prefix` unit test records one and sees it encoded.
    available.insert("fleetpulse_hub_failovers_total".to_owned());
    assert!(hub.contains("fleetpulse_hub_cluster_condition{cluster_namespace=\"fleet\",cluster=\"edge\",condition=\"Reachable\",status=\"True\"} 1"), "{hub}");
    assert!(
        agent.contains(
            "fleetpulse_agent_check_passing{check=\"probe\",phase=\"liveness\",kind=\"tcp\"} 1"
        ),
        "{agent}"
    );

    let mut dashboard_exprs = Vec::new();
    exprs(&dashboard(), &mut dashboard_exprs);
    let docs = std::fs::read_to_string(repo_root().join("docs/metrics.md")).unwrap();
    let sources = [
        (
            "the dashboard",
            metric_names(&dashboard_exprs.join("\n")),
            15,
        ),
        ("the alert rules", metric_names(&rule_exprs().join("\n")), 6),
        ("docs/metrics.md", metric_names(&docs), 20),
    ];
    for (source, names, at_least) in sources {
        assert!(names.len() >= at_least, "{source} names only {names:?}");
        let missing: Vec<_> = names.difference(&available).collect();
        assert!(
            missing.is_empty(),
            "{source} names metrics nobody exposes: {missing:?}\nexposed: {available:?}"
        );
    }
    // And the other way round: every family the hub and agent expose is documented.
    let documented = metric_names(&docs);
    for scrape in [&hub, &agent] {
        for family in scrape.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
            let name = family.split_whitespace().next().unwrap();
            let listed = [name.to_owned(), format!("{name}_total")]
                .iter()
                .any(|n| documented.contains(n));
            assert!(listed, "{name} is exposed but not in docs/metrics.md");
        }
    }
    drop(probed);
}

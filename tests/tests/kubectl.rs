//! The real kubectl against kubesim with the hub's CRDs, through a kubeconfig pointing at
//! kubesim served on loopback. kubectl comes from `bash scripts/install-chart-tools.sh`
//! (`.tools/bin/kubectl`, or set `FLEETPULSE_KUBECTL`); without it every test here fails
//! with that command, nothing is skipped.
//!
//! - `kubectl get` prints the printer columns (reachable, ready, healthy, since) of the
//!   statuses a hub in Kubernetes mode wrote, short names and categories resolve, the
//!   hub's `events.k8s.io` Events are listed by `kubectl get events`, and no timestamp
//!   anywhere is the Unix epoch;
//! - `kubectl explain` documents every field of every CRD.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use fleetpulse_common::api::condition::{HEALTHY, REACHABLE};
use fleetpulse_common::api::{HealthPolicy, MemberCluster, crds};
use fleetpulse_hub::server::Hub;
use fleetpulse_kubesim::{KubeSim, kubeconfig};
use fleetpulse_tests::management::{
    agent, condition_status, create, hub_options, management_cluster,
};
use fleetpulse_tests::wait;

const TIMEOUT: Duration = Duration::from_secs(30);

/// kubectl with a kubeconfig for one served kubesim and its own discovery cache.
struct Kubectl {
    binary: PathBuf,
    dir: tempfile::TempDir,
}

impl Kubectl {
    /// Serves `sim` on loopback and writes its kubeconfig.
    async fn serve(sim: &KubeSim) -> Kubectl {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let binary = std::env::var_os("FLEETPULSE_KUBECTL")
            .map_or_else(|| root.join(".tools/bin/kubectl"), PathBuf::from);
        assert!(
            binary.is_file(),
            "kubectl not found at {} (or set FLEETPULSE_KUBECTL): install it with \
             `bash scripts/install-chart-tools.sh` from the repository root",
            binary.display()
        );
        let (addr, _task) = sim.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = kubeconfig(&format!("http://{addr}"));
        std::fs::write(dir.path().join("kubeconfig"), config).unwrap();
        Kubectl { binary, dir }
    }

    /// Runs kubectl with `args`; its stdout, or a panic with its stderr.
    async fn run(&self, args: &[&str]) -> String {
        let mut command = Command::new(&self.binary);
        command
            .args(args)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .env("HOME", self.dir.path());
        let out = tokio::task::spawn_blocking(move || command.output())
            .await
            .unwrap()
            .unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// The cells of the row whose first cell is `name`, by the header's column names.
fn row(table: &str, name: &str) -> Vec<(String, String)> {
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let cells: Vec<&str> = lines
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"));
    assert_eq!(cells.len(), header.len(), "{table}");
    header
        .iter()
        .zip(cells)
        .map(|(h, c)| ((*h).to_owned(), c.to_owned()))
        .collect()
}

fn cell<'a>(row: &'a [(String, String)], column: &str) -> &'a str {
    &row.iter().find(|(h, _)| h == column).unwrap().1
}

fn is_age(s: &str) -> bool {
    s.len() > 1 && s.ends_with(['s', 'm', 'h', 'd']) && s.starts_with(|c: char| c.is_ascii_digit())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_shows_the_hubs_health_columns_events_and_no_epoch_timestamps() {
    let sim = KubeSim::new();
    let client = sim.client();
    let keys = management_cluster(&client, &["edge-1", "edge-2"]).await;
    create(
        &Api::<HealthPolicy>::namespaced(client.clone(), "fleet"),
        json!({"apiVersion": "fleetpulse.io/v1alpha1", "kind": "HealthPolicy",
               "metadata": {"name": "platform", "namespace": "fleet"},
               "spec": {"clusterSelector": {"matchLabels": {"region": "eu"}}}}),
    )
    .await;
    let kubectl = Kubectl::serve(&sim).await;
    let hub = Hub::start(hub_options(&client)).await.unwrap();
    let url = format!("http://127.0.0.1:{}", hub.addr.port())
        .parse()
        .unwrap();
    // Only edge-1 has an agent: edge-2 turns unreachable after its grace period.
    let (name, key) = &keys[0];
    let running = agent(&url, name, key);
    let clusters: Api<MemberCluster> = Api::namespaced(client.clone(), "fleet");
    wait::until_some(
        "edge-1 Healthy and edge-2 unreachable in the API",
        TIMEOUT,
        || {
            let clusters = clusters.clone();
            async move {
                let healthy = clusters.get("edge-1").await.ok()?;
                let quiet = clusters.get("edge-2").await.ok()?;
                (condition_status(&healthy, HEALTHY).as_deref() == Some("True")
                    && condition_status(&quiet, REACHABLE).as_deref() == Some("False"))
                .then_some(())
            }
        },
    )
    .await
    .unwrap();

    let table = kubectl.run(&["get", "memberclusters", "-n", "fleet"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "REACHABLE", "READY", "HEALTHY", "SINCE", "AGE"],
        "{table}"
    );
    let edge1 = row(&table, "edge-1");
    assert_eq!(
        [
            cell(&edge1, "REACHABLE"),
            cell(&edge1, "READY"),
            cell(&edge1, "HEALTHY")
        ],
        ["True", "True", "True"],
        "{table}"
    );
    assert!(
        is_age(cell(&edge1, "SINCE")) && is_age(cell(&edge1, "AGE")),
        "{table}"
    );
    let quiet = clusters.get("edge-2").await.unwrap();
    let healthy_of_quiet = (quiet.status.as_ref().unwrap().conditions.iter())
        .find(|c| c.type_ == HEALTHY)
        .cloned()
        .unwrap();
    let edge2 = row(&table, "edge-2");
    assert_eq!(cell(&edge2, "REACHABLE"), "False", "{table}");
    assert_eq!(cell(&edge2, "HEALTHY"), healthy_of_quiet.status, "{table}");
    assert!(!table.contains("REASON"), "{table}");

    // The short name, and the priority-1 column only with -o wide.
    let wide = kubectl
        .run(&["get", "mc", "-n", "fleet", "-o", "wide"])
        .await;
    assert_eq!(
        cell(&row(&wide, "edge-2"), "REASON"),
        healthy_of_quiet.reason,
        "{wide}"
    );
    // The category lists every fleetpulse kind.
    let all = kubectl.run(&["get", "fleetpulse", "-A"]).await;
    for kind in ["membercluster", "clusterset", "healthpolicy"] {
        assert!(all.contains(&format!("{kind}.fleetpulse.io/")), "{all}");
    }

    // The hub publishes events.k8s.io Events; kubectl lists core v1 Events: one store.
    let events = kubectl.run(&["get", "events", "-n", "fleet"]).await;
    assert!(
        events.lines().any(|l| l.contains("edge-2")),
        "the hub's Events about edge-2 through the core API:\n{events}"
    );
    let described = kubectl
        .run(&["describe", "mc", "-n", "fleet", "edge-2"])
        .await;
    let events_section = described.split("Events:").nth(1).unwrap_or_default();
    assert!(
        events_section.contains("fleetpulse-hub"),
        "kubectl describe shows the hub's Events:\n{described}"
    );
    // The HealthPolicy's status, written by the hub: both clusters, accepted.
    let policies = kubectl.run(&["get", "hp", "-n", "fleet"]).await;
    let platform = row(&policies, "platform");
    assert_eq!(cell(&platform, "CLUSTERS"), "2", "{policies}");
    assert_eq!(cell(&platform, "ACCEPTED"), "True", "{policies}");

    let dump = kubectl
        .run(&["get", "mc,clustersets,hp,events", "-A", "-o", "yaml"])
        .await;
    assert!(
        !dump.contains("1970-01-01"),
        "an epoch timestamp in the API:\n{dump}"
    );
    running.stop().await.unwrap();
    hub.shutdown().await;
}

/// The object-typed fields under `schema` (through arrays and maps), as kubectl explain
/// descends them.
fn properties(schema: &Value) -> Option<&serde_json::Map<String, Value>> {
    if let Some(p) = schema["properties"].as_object() {
        return Some(p);
    }
    if schema["items"].is_object() {
        return properties(&schema["items"]);
    }
    if schema["additionalProperties"].is_object() {
        return properties(&schema["additionalProperties"]);
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_documents_every_field_of_every_crd() {
    let sim = KubeSim::new();
    for crd in crds::all() {
        Api::<CustomResourceDefinition>::all(sim.client())
            .create(&PostParams::default(), &crd)
            .await
            .unwrap();
    }
    let kubectl = Kubectl::serve(&sim).await;
    let mut explained = 0;
    for crd in crds::all() {
        let plural = crd.spec.names.plural.clone();
        let version = serde_json::to_value(&crd.spec.versions[0]).unwrap();
        let root = &version["schema"]["openAPIV3Schema"];
        let top = kubectl.run(&["explain", &plural]).await;
        let description = top.split("DESCRIPTION:").nth(1).unwrap_or_default();
        assert!(
            !description.trim_start().starts_with("<empty>")
                && !description.contains("Auto-generated"),
            "{plural} has no description of its own:\n{top}"
        );
        let mut todo: Vec<(Vec<String>, &Value)> = vec![(Vec::new(), root)];
        while let Some((path, schema)) = todo.pop() {
            let Some(fields) = properties(schema) else {
                continue;
            };
            let target = std::iter::once(plural.clone())
                .chain(path.iter().cloned())
                .collect::<Vec<_>>()
                .join(".");
            let out = kubectl.run(&["explain", &target]).await;
            explained += 1;
            assert!(
                !out.contains("<no description>"),
                "a field of {target} is undocumented:\n{out}"
            );
            for (name, sub) in fields {
                let listed = out.lines().any(|l| {
                    l.trim_start()
                        .strip_prefix(name.as_str())
                        .is_some_and(|rest| rest.trim_start().starts_with('<'))
                });
                assert!(
                    listed,
                    "kubectl explain {target} does not list {name}:\n{out}"
                );
                let mut next = path.clone();
                next.push(name.clone());
                todo.push((next, sub));
            }
        }
    }
    println!("kubectl explain: {explained} object fields of 4 CRDs, every field described");
    // Short names resolve through discovery.
    for short in ["mc", "hp"] {
        kubectl.run(&["get", short, "-A"]).await;
    }
    let resources = kubectl
        .run(&["api-resources", "--api-group", "fleetpulse.io"])
        .await;
    assert!(
        resources.contains(" mc ") && resources.contains(" hp "),
        "{resources}"
    );
}

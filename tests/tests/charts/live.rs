//! The charts' RBAC against the calls the real hub and agent make. The hub runs in
//! Kubernetes mode with exactly the flags the hub chart renders (TLS paths and listen
//! address swapped for the test's), against a recording simulated management cluster
//! (kubesim). Two agents run with exactly the flags the agent chart renders, each against
//! its own simulated member cluster, with a Lua check, a built-in, a pod check and an HTTP
//! probe whose header comes from a Secret (`checks.secretNames`). The
//! selected cluster's pod check starts failing and the ClusterSet fails over. Then every
//! call each made must be allowed by the rendered rules, and every permission the agent
//! chart grants must have been used, except the listed, justified ones.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use fleetpulse_agent::checks::engine::{CheckEngine, EngineOptions};
use fleetpulse_agent::checks::resources::{KubeReader, Reader};
use fleetpulse_agent::{AgentHandle, key_secret};
use fleetpulse_common::api::condition::{HEALTHY, Status};
use fleetpulse_common::api::{ClusterSet, HealthPolicy, MemberCluster, Set, crds};
use fleetpulse_common::lua::LuaLimits;
use fleetpulse_common::protocol::keys;
use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::mirrors::{MirrorKind, MirrorState};
use fleetpulse_hub::server::Hub;
use fleetpulse_kubesim::{KubeSim, Outcome, PodMatcher, RequestRecord};
use fleetpulse_tests::admin_api;
use fleetpulse_tests::fleet::condition_of;
use fleetpulse_tests::mirror_objects;
use fleetpulse_tests::pki::Pki;
use fleetpulse_tests::wait;

use super::rbac;
use super::tools::{Chart, NAMESPACE, documents, render, repo_root, strings};

/// Namespace of the MemberClusters on the management cluster.
const FLEET: &str = "fleet";
/// Where the agents' pod checks run (not the release namespace, to tell the Roles apart).
const CHECKS_NAMESPACE: &str = "fleetpulse-checks";
const CLUSTERS: [&str; 2] = ["edge-1", "edge-2"];
/// The Secret of the checks namespace the HTTP probe's header comes from.
const PROBE_SECRET: &str = "probe-token";
const PROBE_TOKEN: &str = "Bearer probe-s3cret";
const TIMEOUT: Duration = Duration::from_secs(40);

fn container_args(docs: &[Value], container: &str) -> Vec<String> {
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    let c = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == container)
        .unwrap();
    serde_json::from_value(c["args"].clone()).unwrap()
}

/// `args` with the value of each `--flag=` in `swap` replaced.
fn swap_flags(args: Vec<String>, swap: &[(&str, String)]) -> Vec<String> {
    args.into_iter()
        .map(|arg| {
            swap.iter()
                .find(|(flag, _)| arg.starts_with(&format!("{flag}=")))
                .map_or(arg.clone(), |(flag, value)| format!("{flag}={value}"))
        })
        .collect()
}

async fn create<K>(api: &Api<K>, value: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

async fn namespaces(sim: &KubeSim, names: &[&str]) {
    let api = Api::<Namespace>::all(sim.client());
    for name in names {
        create(&api, json!({"metadata": {"name": name}})).await;
    }
}

/// A loopback endpoint answering 200 only with `Authorization: PROBE_TOKEN`.
async fn private_endpoint() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(|headers: axum::http::HeaderMap| async move {
            match headers.get("authorization") {
                Some(v) if v.as_bytes() == PROBE_TOKEN.as_bytes() => axum::http::StatusCode::OK,
                _ => axum::http::StatusCode::UNAUTHORIZED,
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// The MemberCluster with a Lua check over nodes, a built-in, a pod check, an HTTP probe
/// of `private` with its header from a Secret, and a hub-side check over KeptnMetrics on
/// the management cluster.
fn member_cluster(name: &str, public_key: &str, private: std::net::SocketAddr) -> Value {
    json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": FLEET, "labels": {"region": "eu"}},
        "spec": {
            "heartbeat": {"intervalSeconds": 1, "gracePeriodSeconds": 4},
            "agent": {"publicKeys": [{"publicKey": public_key}]},
            "livenessChecks": [
                {"name": "nodes-ready", "resourceSelectors": [{"version": "v1", "kind": "Node"}],
                 "condition": "function evaluate() return {pass = #resources > 0, message = #resources .. ' nodes'} end"},
                {"name": "all-nodes", "readyNodes": {"minPercent": 100}},
                {"name": "private-api", "http": {"url": format!("http://{private}/"), "httpHeaders": [
                    {"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": PROBE_SECRET, "key": "token"}}}]}},
                {"name": "error-rate", "resourceSelectors": [{"group": "metrics.keptn.sh", "version": "v1", "kind": "KeptnMetric", "fromHub": true}],
                 "condition": "function evaluate() return {pass = true, message = #resources .. ' metrics'} end"},
                {"name": "dns", "pod": {
                    "template": {"spec": {"containers": [{"name": "probe", "image": "busybox", "command": ["nslookup", "kubernetes.default"]}]}},
                    "intervalSeconds": 1, "consecutiveFailureThreshold": 1}}
            ]
        }
    })
}

/// The agent chart rendered for one cluster, reporting to the test hub.
fn agent_docs(cluster: &str, hub_port: u16, ca: &std::path::Path) -> Vec<Value> {
    documents(&render(
        Chart::Agent,
        &strings(&[
            "--set",
            &format!("hub.url=https://localhost:{hub_port}"),
            "--set",
            &format!("cluster.namespace={FLEET}"),
            "--set",
            &format!("cluster.name={cluster}"),
            "--set-file",
            &format!("hub.caBundle={}", ca.display()),
            "--set",
            &format!("checks.namespace={CHECKS_NAMESPACE}"),
            "--set",
            &format!("checks.secretNames={{{PROBE_SECRET}}}"),
            "--set",
            "intervalSeconds=1",
        ]),
    ))
}

/// Starts an agent from the chart's arguments the way `fleetpulse-agent run` does in a
/// pod (agent/src/cli.rs): in-cluster API, key in its Secret, cluster UID from kube-system.
async fn start_agent(
    args: Vec<String>,
    ca: &std::path::Path,
    member: &KubeSim,
    stop: &CancellationToken,
) -> AgentHandle {
    let args = swap_flags(args, &[("--hub-ca", ca.display().to_string())]);
    let cli = fleetpulse_agent::cli::Cli::try_parse_from(
        std::iter::once("fleetpulse-agent".to_owned()).chain(args.clone()),
    )
    .unwrap_or_else(|e| panic!("the agent refuses the chart's arguments {args:?}:\n{e}"));
    let fleetpulse_agent::cli::Command::Run(mut run) = cli.command else {
        panic!("the chart runs `fleetpulse-agent run`: {args:?}")
    };
    let client = member.client();
    let (key, _) =
        key_secret::load_or_create(client.clone(), &run.agent_namespace, &run.key_secret)
            .await
            .unwrap();
    if run.cluster_uid.is_empty() {
        run.cluster_uid = key_secret::cluster_uid(client.clone())
            .await
            .unwrap_or_default();
    }
    let engine_options = EngineOptions {
        lua_limits: LuaLimits {
            deadline: Duration::from_millis(run.lua_deadline_ms),
            memory_bytes: (run.lua_memory_mib as usize) << 20,
            ..LuaLimits::default()
        },
        default_period: Duration::from_secs(run.interval_seconds),
        checks_namespace: run.checks_namespace.clone(),
        metrics: Default::default(),
        cache: Default::default(),
    };
    let mut options = run.into_options(Some(key)).unwrap();
    options.checks = Arc::new(CheckEngine::spawn(
        Reader::Kube(KubeReader::new(client)),
        engine_options,
        stop.child_token(),
    ));
    fleetpulse_agent::spawn(options).unwrap()
}

/// The KeptnMetric CRD, as Keptn installs it on the management cluster.
fn keptn_metric_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "keptnmetrics.metrics.keptn.sh"},
        "spec": {"group": "metrics.keptn.sh", "scope": "Namespaced",
                 "names": {"plural": "keptnmetrics", "singular": "keptnmetric", "kind": "KeptnMetric"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                               "subresources": {"status": {}}}]}
    }))
    .unwrap()
}

fn selected(hub: &Hub) -> Option<String> {
    hub.fleet
        .cluster_sets()
        .first()
        .and_then(|cs| cs.status.clone())
        .and_then(|s| s.selected_cluster_refs.first().map(|r| r.name.clone()))
}

fn healthy(hub: &Hub, name: &str) -> Status {
    condition_of(
        &hub.fleet.member_clusters(),
        &ClusterId::new(FLEET, name),
        HEALTHY,
    )
}

/// The permissions the agent chart grants for what checks read (`rbac.read.rules` in
/// values.yaml): configurable, and broader than one test's checks by design (checks are
/// written by the operator), so they need not all be used here.
fn configurable_read_grants() -> BTreeSet<String> {
    let values =
        std::fs::read_to_string(repo_root().join("charts/fleetpulse-agent/values.yaml")).unwrap();
    let values = &documents(&values)[0];
    let mut out = BTreeSet::new();
    for rule in values["rbac"]["read"]["rules"].as_array().unwrap() {
        let mut rule: rbac::Rule = serde_json::from_value(rule.clone()).unwrap();
        // The ClusterRole grants watch wherever a rule grants list (the agent's caches).
        if rule.verbs.iter().any(|v| v == "list") && !rule.verbs.iter().any(|v| v == "watch") {
            rule.verbs.push("watch".into());
        }
        for verb in &rule.verbs {
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    let group = if group.is_empty() { "core" } else { group };
                    out.insert(format!(
                        "ClusterRole {}-read: {verb} {group}/{resource}",
                        Chart::Agent.fullname()
                    ));
                }
            }
        }
    }
    out
}

fn has(requests: &[RequestRecord], verb: &str, resource: &str, namespace: Option<&str>) -> bool {
    requests.iter().any(|r| {
        r.verb == verb && rbac::resource_of(r) == resource && r.namespace.as_deref() == namespace
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chart_rbac_allows_every_call_of_hub_and_agents_and_grants_the_agent_nothing_unused() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::generate(dir.path()).unwrap();

    // The management cluster as helm and an operator leave it: CRDs, the release namespace,
    // MemberClusters with the agents' keys, a ClusterSet.
    let mgmt = KubeSim::new();
    for crd in crds::all() {
        Api::<CustomResourceDefinition>::all(mgmt.client())
            .create(&PostParams::default(), &crd)
            .await
            .unwrap();
    }
    Api::<CustomResourceDefinition>::all(mgmt.client())
        .create(&PostParams::default(), &keptn_metric_crd())
        .await
        .unwrap();
    namespaces(&mgmt, &[NAMESPACE, FLEET, "argocd"]).await;
    // The objects the chart's mirror defaults name: a SveltosCluster, an Argo CD cluster
    // Secret and a Karmada Cluster per cluster.
    mirror_objects::install_crds(&mgmt.client()).await.unwrap();
    for name in CLUSTERS {
        let (sveltos, argocd, karmada) = (
            MirrorKind::SveltosCluster,
            MirrorKind::ArgoCdSecret,
            MirrorKind::KarmadaCluster,
        );
        mirror_objects::create(&mgmt, sveltos, Some(FLEET), name, json!({})).await;
        mirror_objects::create(&mgmt, argocd, Some("argocd"), name, json!({})).await;
        mirror_objects::create(&mgmt, karmada, None, name, json!({})).await;
    }
    let members: Vec<KubeSim> = CLUSTERS.iter().map(|_| KubeSim::new()).collect();
    let mut member_marks = Vec::new();
    let private = private_endpoint().await;
    for (name, member) in CLUSTERS.iter().zip(&members) {
        namespaces(member, &[NAMESPACE, CHECKS_NAMESPACE]).await;
        create(
            &Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
                member.client(),
                CHECKS_NAMESPACE,
            ),
            json!({"metadata": {"name": PROBE_SECRET}, "stringData": {"token": PROBE_TOKEN}}),
        )
        .await;
        member_marks.push(member.requests().len());
        // The agent's first start generates its key (the same call start_agent makes).
        let (key, created) =
            key_secret::load_or_create(member.client(), NAMESPACE, "fleetpulse-agent-key")
                .await
                .unwrap();
        assert!(created);
        let public_key = keys::public_key_string(&key.verifying_key());
        create(
            &Api::<MemberCluster>::namespaced(mgmt.client(), FLEET),
            member_cluster(name, &public_key, private),
        )
        .await;
    }
    create(&Api::<ClusterSet>::all(mgmt.client()), json!({
        "apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet", "metadata": {"name": "primary"},
        "spec": {"clusterSelector": {"matchLabels": {"region": "eu"}}, "maxReplicas": 1}
    }))
    .await;
    create(
        &Api::<Set>::namespaced(mgmt.client(), FLEET),
        json!({
            "apiVersion": "fleetpulse.io/v1alpha1", "kind": "Set",
            "metadata": {"name": "primary", "namespace": FLEET},
            "spec": {"clusterSelector": {"matchLabels": {"region": "eu"}}, "maxReplicas": 1}
        }),
    )
    .await;
    // A HealthPolicy matching no cluster (so it changes no check): its status is written.
    create(
        &Api::<HealthPolicy>::namespaced(mgmt.client(), FLEET),
        json!({
            "apiVersion": "fleetpulse.io/v1alpha1", "kind": "HealthPolicy",
            "metadata": {"name": "staging", "namespace": FLEET},
            "spec": {"clusterSelector": {"matchLabels": {"tier": "staging"}}}
        }),
    )
    .await;

    // The hub, with the hub chart's arguments (every optional feature on, which includes
    // reading KeptnMetrics for hub-side checks).
    let hub_docs = documents(&render(
        Chart::Hub,
        &strings(&["-f", "charts/fleetpulse-hub/ci/all-features-values.yaml"]),
    ));
    let hub_args = swap_flags(
        container_args(&hub_docs, "hub"),
        &[
            ("--listen", "127.0.0.1:0".to_owned()),
            ("--admin-listen", "127.0.0.1:0".to_owned()),
            ("--tls-cert", pki.server_cert.display().to_string()),
            ("--tls-key", pki.server_key.display().to_string()),
        ],
    );
    let cli = fleetpulse_hub::cli::Cli::try_parse_from(
        std::iter::once("fleetpulse-hub".to_owned()).chain(hub_args.clone()),
    )
    .unwrap_or_else(|e| panic!("the hub refuses the chart's arguments {hub_args:?}:\n{e}"));
    let fleetpulse_hub::cli::Command::Serve(serve) = cli.command else {
        panic!("the chart runs `fleetpulse-hub serve`: {hub_args:?}")
    };
    assert!(serve.kube, "the chart runs the hub in Kubernetes mode");
    let mut options = serve.options();
    options.kube = Some(mgmt.client());
    // The downward API's POD_NAME/POD_NAMESPACE: the leader labels its own Pod.
    let pod = "fleetpulse-hub-7d9f8b6c5-x2x4q";
    create(
        &Api::<k8s_openapi::api::core::v1::Pod>::namespaced(mgmt.client(), NAMESPACE),
        json!({"metadata": {"name": pod, "namespace": NAMESPACE},
               "spec": {"containers": [{"name": "hub", "image": "fleetpulse-hub"}]}}),
    )
    .await;
    let mgmt_mark = mgmt.requests().len();
    options
        .leader
        .as_mut()
        .expect("the chart turns on leader election")
        .pod = Some((NAMESPACE.into(), pod.into()));
    let hub = Hub::start(options).await.unwrap();

    let stop = CancellationToken::new();
    let mut agents = Vec::new();
    let mut agent_grants = Vec::new();
    for (name, member) in CLUSTERS.iter().zip(&members) {
        let docs = agent_docs(name, hub.addr.port(), &pki.ca_cert);
        agent_grants.push(rbac::grants(&docs, &Chart::Agent.fullname(), NAMESPACE));
        agents.push(start_agent(container_args(&docs, "agent"), &pki.ca_cert, member, &stop).await);
    }

    wait::until("both clusters Healthy and one selected", TIMEOUT, || {
        CLUSTERS.iter().all(|c| healthy(&hub, c) == Status::True) && selected(&hub).is_some()
    })
    .await
    .unwrap();
    let first = selected(&hub).unwrap();
    let victim = CLUSTERS.iter().position(|c| *c == first).unwrap();
    // The selected cluster's DNS pods start failing: its agent reads their log, the
    // cluster turns unhealthy, the ClusterSet fails over.
    members[victim].set_pod_outcome(
        PodMatcher::name_prefix("fleetpulse-dns-"),
        Outcome::Fail {
            exit_code: 1,
            log: ";; connection timed out; no servers could be reached\n".into(),
        },
    );
    wait::until("the ClusterSet to fail over", TIMEOUT, || {
        healthy(&hub, &first) == Status::False && selected(&hub).is_some_and(|s| s != first)
    })
    .await
    .unwrap();
    let readyz_passing = hub.fleet.member_clusters().iter().all(|mc| {
        mc.status.as_ref().is_some_and(|s| {
            s.checks
                .iter()
                .any(|c| c.name == "apiserver-readyz" && c.passing)
        })
    });
    assert!(readyz_passing, "the agents called /readyz");
    // Every mirror written, the unhealthy cluster's Karmada Cluster with its taint: the
    // hub has used its mirror grants.
    wait::until("every mirror written", TIMEOUT, || {
        hub.fleet.member_clusters().iter().all(|mc| {
            let mirrors = mc
                .status
                .as_ref()
                .map(|s| s.mirrors.clone())
                .unwrap_or_default();
            mirrors.len() == 3 && mirrors.iter().all(|m| m.state == MirrorState::Written)
        }) && hub.fleet.member_clusters().iter().any(|mc| {
            let mirrors = mc
                .status
                .as_ref()
                .map(|s| s.mirrors.clone())
                .unwrap_or_default();
            mirrors.iter().any(|m| m.taint.is_some())
        })
    })
    .await
    .unwrap();
    // Prometheus scraping the admin port with its ServiceAccount token: the hub reviews
    // the token and the access (its TokenReview and SubjectAccessReview grants).
    let prometheus = "system:serviceaccount:monitoring:prometheus";
    mgmt.add_token(
        "prometheus-sa-token",
        prometheus,
        &["system:serviceaccounts"],
    );
    mgmt.allow_non_resource(prometheus, "get", "/metrics");
    let metrics = format!("https://localhost:{}/metrics", hub.admin_addr.port());
    let (status, body) = admin_api::get(&pki.ca_cert, &metrics, Some("prometheus-sa-token"))
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("fleetpulse_hub_leader 1"), "{body}");
    for agent in agents {
        agent.stop().await.unwrap();
    }
    stop.cancel();
    hub.shutdown().await;

    // The hub: everything it called is granted.
    let hub_requests = mgmt.requests()[mgmt_mark..].to_vec();
    let hub_grants = rbac::grants(&hub_docs, &Chart::Hub.fullname(), NAMESPACE);
    let denied = rbac::denied(&hub_grants, &hub_requests);
    assert!(
        denied.is_empty(),
        "the hub chart does not grant calls the hub made: {denied:#?}"
    );
    for (verb, resource, namespace) in [
        ("watch", "memberclusters", None),
        ("patch", "memberclusters/status", Some(FLEET)),
        ("patch", "clustersets/status", None),
        ("patch", "memberclusters", Some(FLEET)),
        ("patch", "healthpolicies/status", Some(FLEET)),
    ] {
        assert!(
            has(&hub_requests, verb, resource, namespace),
            "the hub's {verb} {resource} was exercised"
        );
    }
    let mut unused = rbac::unused(&hub_grants, &hub_requests);
    // kube's event recorder patches an Event only to count a repeat of it.
    unused.remove(&format!(
        "ClusterRole {}: patch events.k8s.io/events",
        Chart::Hub.fullname()
    ));
    // Adoption creates a MemberCluster only for an object that has none (here every
    // SveltosCluster has its MemberCluster already, so adoption must leave them alone);
    // enrolment reads, creates and updates its Secrets only when an agent enrols. The
    // watches both start with are exercised here; the writes in the adoption scenario.
    unused.remove(&format!(
        "ClusterRole {}: create fleetpulse.io/memberclusters",
        Chart::Hub.fullname()
    ));
    for verb in ["get", "create", "update"] {
        unused.remove(&format!(
            "Role {NAMESPACE}/{}-enrolment: {verb} core/secrets",
            Chart::Hub.fullname()
        ));
    }
    // The hub state's first write is server-side apply's (the API server also asks for
    // create then; kubesim records a patch), and its objects are deleted only when the
    // shard count changes with the fleet's size.
    for verb in ["create", "delete"] {
        unused.remove(&format!(
            "Role {NAMESPACE}/{}-state: {verb} core/configmaps",
            Chart::Hub.fullname()
        ));
    }
    assert!(
        unused.is_empty(),
        "the hub chart grants what the hub never used: {unused:#?}"
    );

    // The agents: everything each called is granted, and everything granted was called by
    // one of them (only the failing cluster's agent reads a pod log).
    let mut all_requests = Vec::new();
    for (i, member) in members.iter().enumerate() {
        let requests = member.requests()[member_marks[i]..].to_vec();
        let denied = rbac::denied(&agent_grants[i], &requests);
        assert!(
            denied.is_empty(),
            "the agent chart does not grant calls the agent made: {denied:#?}"
        );
        assert!(has(&requests, "create", "pods", Some(CHECKS_NAMESPACE)));
        // The nodes-ready Lua check reads Nodes from a watch-fed cache: a list, then a
        // watch, both granted (the denied check above).
        assert!(has(&requests, "list", "nodes", None));
        assert!(has(&requests, "watch", "nodes", None));
        assert!(has(&requests, "get", "secrets", Some(CHECKS_NAMESPACE)));
        assert!(!has(&requests, "create", "pods", Some(NAMESPACE)));
        all_requests.extend(requests);
    }
    let mut unused = rbac::unused(&agent_grants[0], &all_requests);
    unused.retain(|g| !configurable_read_grants().contains(g));
    // Non-resource URLs never reach kubesim's ledger; /readyz is the always-on built-in
    // check whose passing result is asserted above.
    unused.retain(|g| !g.ends_with("get /readyz"));
    assert!(
        unused.is_empty(),
        "the agent chart grants what the agents never used: {unused:#?}"
    );
}

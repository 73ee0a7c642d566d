//! Replicas sharing the fleet (`sharding.enabled`): the hub chart renders a StatefulSet
//! with the shard flags and no leader election, a headless Service naming each replica,
//! Services selecting every replica, a certificate naming each one, RBAC naming exactly
//! the shard Leases and state objects, and refuses shard counts and URLs the hub cannot
//! use; with sharding off the chart renders as before. Then two replicas run with the
//! flags rendered for their Pods against a recording API server: they balance the
//! shards, take heartbeats (an agent of the other replica's shard is redirected to it)
//! and flush their shards' state; one stops and the other takes its shards over. Every
//! call either made is allowed by the rendered rules, and every permission the shard
//! Lease and hub-state Roles grant was used.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use fleetpulse_common::protocol::report::ClusterId;
use fleetpulse_hub::server::Hub;
use fleetpulse_kubesim::{KubeSim, RequestRecord, eventually};
use fleetpulse_tests::fleet::SimCluster;
use fleetpulse_tests::hand_agent::HandAgent;
use fleetpulse_tests::management::management_cluster;
use fleetpulse_tests::pki::Pki;

use super::rbac::{self, Grant};
use super::tools::{
    Chart, NAMESPACE, container, documents, of_kind, one, render, strings, template,
};

const REPLICAS: usize = 3;
const SHARDS: u32 = 12;

fn sharded(extra: &[&str]) -> Vec<Value> {
    let mut args = strings(&[
        "--set",
        "sharding.enabled=true",
        "--set",
        &format!("replicas={REPLICAS}"),
        "--set",
        &format!("sharding.shards={SHARDS}"),
    ]);
    args.extend(strings(extra));
    documents(&render(Chart::Hub, &args))
}

fn args_of(workload: &Value) -> Vec<String> {
    serde_json::from_value(container(workload, "hub")["args"].clone()).unwrap()
}

fn named<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    (of_kind(docs, kind).into_iter())
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// The pod selector the chart gives every hub Pod.
fn selector() -> Value {
    json!({"app.kubernetes.io/name": "fleetpulse-hub", "app.kubernetes.io/instance": "fp",
           "app.kubernetes.io/component": "hub"})
}

/// `$(VAR)` in `args` replaced from `env`, as the kubelet expands a container's args.
fn expand(args: &[String], env: &[(&str, &str)]) -> Vec<String> {
    (args.iter())
        .map(|a| {
            env.iter()
                .fold(a.clone(), |a, (k, v)| a.replace(&format!("$({k})"), v))
        })
        .collect()
}

fn shard_names(prefix: &str) -> Vec<String> {
    (0..SHARDS).map(|k| format!("{prefix}{k}")).collect()
}

#[test]
fn sharded_hub_runs_as_a_statefulset_with_the_shard_flags_and_no_leader_election() {
    let docs = sharded(&[]);
    assert!(of_kind(&docs, "Deployment").is_empty(), "no Deployment");
    let sts = one(&docs, "StatefulSet");
    assert_eq!(sts["spec"]["replicas"], REPLICAS);
    assert_eq!(sts["spec"]["serviceName"], "fp-fleetpulse-hub-replicas");
    assert_eq!(sts["spec"]["podManagementPolicy"], "Parallel");
    assert_eq!(sts["spec"]["selector"]["matchLabels"], selector());
    let args = args_of(sts);
    let url = "https://$(POD_NAME).fp-fleetpulse-hub-replicas.fleetpulse-system.svc:8443";
    for flag in [
        format!("--shards={SHARDS}"),
        format!("--shard-url={url}"),
        format!("--lease-namespace={NAMESPACE}"),
        "--lease-duration-seconds=15".to_owned(),
    ] {
        assert!(args.contains(&flag), "{flag} in {args:?}");
    }
    for flag in ["--leader-elect", "--lease-name"] {
        assert!(
            !args
                .iter()
                .any(|a| a == flag || a.starts_with(&format!("{flag}="))),
            "{flag} in {args:?}"
        );
    }
    // $(POD_NAME) expands only from a variable the container defines: the downward API's.
    let env = &container(sts, "hub")["env"];
    let pod_name = (env.as_array().unwrap().iter())
        .find(|e| e["name"] == "POD_NAME")
        .expect("POD_NAME in the hub's env");
    assert_eq!(
        pod_name["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    // Expanded for its second Pod, the hub takes the flags: sharded, with that Pod's URL.
    let pod = "fp-fleetpulse-hub-1";
    let argv =
        std::iter::once("fleetpulse-hub".to_owned()).chain(expand(&args, &[("POD_NAME", pod)]));
    let cli = fleetpulse_hub::cli::Cli::try_parse_from(argv)
        .unwrap_or_else(|e| panic!("the hub refuses the chart's arguments {args:?}:\n{e}"));
    let fleetpulse_hub::cli::Command::Serve(serve) = cli.command else {
        panic!("the chart runs `fleetpulse-hub serve`")
    };
    let options = serve.options();
    assert!(options.leader.is_none(), "no leader election");
    let shards = options.shards.expect("sharded");
    assert_eq!(
        (shards.shards, shards.namespace.as_str()),
        (SHARDS, NAMESPACE)
    );
    assert_eq!(
        shards.url.as_deref(),
        Some("https://fp-fleetpulse-hub-1.fp-fleetpulse-hub-replicas.fleetpulse-system.svc:8443")
    );
}

#[test]
fn each_replica_has_a_dns_name_and_the_agent_and_admin_services_select_every_replica() {
    let docs = sharded(&[]);
    let headless = named(&docs, "Service", "fp-fleetpulse-hub-replicas");
    assert_eq!(headless["spec"]["clusterIP"], "None");
    assert_eq!(headless["spec"]["publishNotReadyAddresses"], true);
    assert_eq!(headless["spec"]["selector"], selector());
    assert_eq!(headless["spec"]["ports"][0]["targetPort"], "https");
    assert_eq!(headless["spec"]["ports"][0]["port"], 8443);
    let pod_labels = &one(&docs, "StatefulSet")["spec"]["template"]["metadata"]["labels"];
    for name in ["fp-fleetpulse-hub", "fp-fleetpulse-hub-admin"] {
        let service = named(&docs, "Service", name);
        assert_eq!(
            service["spec"]["selector"],
            selector(),
            "{name}: no leader label"
        );
        for (k, v) in service["spec"]["selector"].as_object().unwrap() {
            assert_eq!(&pod_labels[k], v, "{name} selects the replicas' Pods");
        }
    }
    // Without sharding, both still select the leader only.
    let leader = documents(&render(Chart::Hub, &[]));
    for name in ["fp-fleetpulse-hub", "fp-fleetpulse-hub-admin"] {
        let service = named(&leader, "Service", name);
        assert_eq!(service["spec"]["selector"]["fleetpulse.io/leader"], "true");
    }
}

#[test]
fn the_certificate_names_every_replica_at_its_own_url_and_under_the_headless_service() {
    let docs = sharded(&[
        "--set",
        "sharding.replicaUrl=https://$(POD_NAME).hub.example.com",
        "--set",
        "tls.certManager.enabled=true",
        "--set",
        "tls.certManager.issuerRef.name=fleet-ca",
    ]);
    let args = args_of(one(&docs, "StatefulSet"));
    assert!(args.contains(&"--shard-url=https://$(POD_NAME).hub.example.com".to_owned()));
    let names: BTreeSet<String> =
        serde_json::from_value(one(&docs, "Certificate")["spec"]["dnsNames"].clone()).unwrap();
    for i in 0..REPLICAS {
        for name in [
            format!("fp-fleetpulse-hub-{i}.hub.example.com"),
            format!("fp-fleetpulse-hub-{i}.fp-fleetpulse-hub-replicas.{NAMESPACE}.svc"),
        ] {
            assert!(names.contains(&name), "{name} in {names:?}");
        }
    }
    assert!(
        names.contains(&format!("fp-fleetpulse-hub.{NAMESPACE}.svc")),
        "the agents' Service"
    );
    assert!(
        !names
            .iter()
            .any(|n| n.contains(&format!("hub-{REPLICAS}."))),
        "only {REPLICAS} replicas"
    );
}

fn request(verb: &str, group: &str, resource: &str, name: Option<&str>) -> RequestRecord {
    RequestRecord {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        namespace: Some(NAMESPACE.into()),
        subresource: None,
        name: name.map(Into::into),
    }
}

fn rules_on<'a>(grants: &'a [Grant], group: &str, resource: &str) -> Vec<&'a rbac::Rule> {
    (grants.iter())
        .filter(|g| g.rule.api_groups == [group] && g.rule.resources.iter().any(|r| r == resource))
        .map(|g| &g.rule)
        .collect()
}

#[test]
fn shard_lease_and_state_rules_name_exactly_the_shards_and_grant_no_leader_lease_or_pod_label() {
    let docs = sharded(&[]);
    let grants = rbac::grants(&docs, &Chart::Hub.fullname(), NAMESPACE);
    let leases = rules_on(&grants, "coordination.k8s.io", "leases");
    let by_name: Vec<_> = leases
        .iter()
        .filter(|r| !r.resource_names.is_empty())
        .collect();
    assert_eq!(by_name.len(), 1, "{leases:?}");
    assert_eq!(by_name[0].resource_names, shard_names("fleetpulse-shard-"));
    assert_eq!(by_name[0].verbs, ["update"]);
    let unnamed: Vec<_> = leases
        .iter()
        .filter(|r| r.resource_names.is_empty())
        .collect();
    assert_eq!(unnamed.len(), 1, "{leases:?}");
    assert_eq!(unnamed[0].verbs, ["create", "list"]);
    let maps = rules_on(&grants, "", "configmaps");
    let state = shard_names(&format!("fleetpulse-hub-state-{SHARDS}-"));
    assert!(
        maps.iter()
            .any(|r| r.resource_names == state && r.verbs == ["get", "patch"]),
        "{maps:?}"
    );
    assert!(
        maps.iter()
            .any(|r| r.resource_names.is_empty() && r.verbs == ["list", "create"])
    );
    assert_eq!(maps.len(), 2, "{maps:?}");
    assert!(
        rules_on(&grants, "", "pods").is_empty(),
        "no Pod is labelled"
    );
    let last = format!("fleetpulse-shard-{}", SHARDS - 1);
    let state_3 = format!("fleetpulse-hub-state-{SHARDS}-3");
    for (allowed, r) in [
        (
            true,
            request("update", "coordination.k8s.io", "leases", Some(&last)),
        ),
        (
            true,
            request("create", "coordination.k8s.io", "leases", None),
        ),
        (true, request("list", "coordination.k8s.io", "leases", None)),
        (true, request("get", "", "configmaps", Some(&state_3))),
        (
            false,
            request(
                "update",
                "coordination.k8s.io",
                "leases",
                Some("fleetpulse-shard-12"),
            ),
        ),
        (
            false,
            request(
                "update",
                "coordination.k8s.io",
                "leases",
                Some("fleetpulse-hub"),
            ),
        ),
        (
            false,
            request(
                "get",
                "coordination.k8s.io",
                "leases",
                Some("fleetpulse-shard-0"),
            ),
        ),
        (
            false,
            request(
                "patch",
                "coordination.k8s.io",
                "leases",
                Some("fleetpulse-shard-0"),
            ),
        ),
        (
            false,
            request(
                "delete",
                "coordination.k8s.io",
                "leases",
                Some("fleetpulse-shard-0"),
            ),
        ),
        (
            false,
            request("patch", "", "pods", Some("fp-fleetpulse-hub-0")),
        ),
        (
            false,
            request("get", "", "configmaps", Some("fleetpulse-hub-state-32-3")),
        ),
        (false, request("delete", "", "configmaps", Some(&state_3))),
    ] {
        let what = rbac::describe(&r);
        assert_eq!(
            grants.iter().any(|g| rbac::allows(g, &r)),
            allowed,
            "{what}"
        );
    }
}

/// Each (namespace, verb, group, resource, names) the grants give.
fn permissions(grants: &[Grant]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for g in grants {
        let r = &g.rule;
        for (verb, group, resource) in (r.verbs.iter())
            .flat_map(|v| r.api_groups.iter().map(move |g| (v, g)))
            .flat_map(|(v, g)| r.resources.iter().map(move |x| (v, g, x)))
        {
            let names = if r.resource_names.is_empty() {
                "any".to_owned()
            } else {
                r.resource_names.join(",")
            };
            let ns = g.namespace.as_deref().unwrap_or("(cluster)");
            out.insert(format!("{ns} {verb} {group}/{resource} {names}"));
        }
    }
    out
}

#[test]
fn sharding_changes_only_the_lease_and_state_permissions_of_the_leader_elected_chart() {
    let leader = permissions(&rbac::grants(
        &documents(&render(
            Chart::Hub,
            &strings(&["--set", &format!("replicas={REPLICAS}")]),
        )),
        &Chart::Hub.fullname(),
        NAMESPACE,
    ));
    let shared = permissions(&rbac::grants(
        &sharded(&[]),
        &Chart::Hub.fullname(),
        NAMESPACE,
    ));
    let lease_names = shard_names("fleetpulse-shard-").join(",");
    let state_names = shard_names(&format!("fleetpulse-hub-state-{SHARDS}-")).join(",");
    let ns = NAMESPACE;
    let added: BTreeSet<String> = shared.difference(&leader).cloned().collect();
    let expected_added: BTreeSet<String> = [
        format!("{ns} update coordination.k8s.io/leases {lease_names}"),
        format!("{ns} list coordination.k8s.io/leases any"),
        format!("{ns} get /configmaps {state_names}"),
        format!("{ns} patch /configmaps {state_names}"),
    ]
    .into();
    assert_eq!(added, expected_added);
    let removed: BTreeSet<String> = leader.difference(&shared).cloned().collect();
    let expected_removed: BTreeSet<String> = [
        format!("{ns} get coordination.k8s.io/leases fleetpulse-hub"),
        format!("{ns} patch coordination.k8s.io/leases fleetpulse-hub"),
        format!("{ns} patch /pods any"),
        format!("{ns} patch /configmaps any"),
        format!("{ns} delete /configmaps any"),
    ]
    .into();
    assert_eq!(removed, expected_removed);
}

#[test]
fn shard_counts_out_of_range_too_many_replicas_and_urls_without_the_pod_name_are_refused() {
    for (set, expected) in [
        ("sharding.shards=0", "at '/sharding/shards': minimum"),
        ("sharding.shards=1025", "at '/sharding/shards': maximum"),
        (
            "sharding.replicaUrl=https://hub.example.com",
            "at '/sharding/replicaUrl'",
        ),
        (
            "sharding.replicaUrl=http://$(POD_NAME).hub.example.com",
            "at '/sharding/replicaUrl'",
        ),
        (
            "sharding.replicaUrl=https://$(POD_NAME).hub.example.com?x=1",
            "at '/sharding/replicaUrl'",
        ),
        (
            "sharding.leaderElect=true",
            "additional properties 'leaderElect' not allowed",
        ),
        (
            "replicas=13",
            "replicas (13) is more than sharding.shards (12)",
        ),
    ] {
        let args = strings(&[
            "--set",
            "sharding.enabled=true",
            "--set",
            "sharding.shards=12",
            "--set",
            set,
        ]);
        match template(Chart::Hub, &args) {
            Ok(_) => panic!("accepted {set}"),
            Err(message) => assert!(
                message.contains(expected),
                "{set}: {expected:?} in {message}"
            ),
        }
    }
}

#[test]
fn with_sharding_off_the_chart_renders_the_leader_elected_deployment_as_before() {
    let default = render(Chart::Hub, &[]);
    assert_eq!(
        render(
            Chart::Hub,
            &strings(&[
                "--set",
                "sharding.enabled=false",
                "--set",
                "sharding.shards=7"
            ])
        ),
        default,
        "the sharding values change nothing while it is off"
    );
    let docs = documents(&default);
    assert!(of_kind(&docs, "StatefulSet").is_empty());
    assert!(
        !docs
            .iter()
            .any(|d| d["metadata"]["name"] == "fp-fleetpulse-hub-replicas")
    );
    let args = args_of(one(&docs, "Deployment"));
    assert!(args.contains(&"--leader-elect".to_owned()), "{args:?}");
    assert!(!args.iter().any(|a| a.starts_with("--shard")), "{args:?}");
    let roles: Vec<&str> = of_kind(&docs, "Role")
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(
        roles.contains(&"fp-fleetpulse-hub-leader-election"),
        "{roles:?}"
    );
    assert!(!roles.contains(&"fp-fleetpulse-hub-shards"), "{roles:?}");
}

const PODS: [&str; 2] = ["fp-fleetpulse-hub-0", "fp-fleetpulse-hub-1"];
const NAMES: [&str; 8] = [
    "edge-1", "edge-2", "edge-3", "edge-4", "edge-5", "edge-6", "edge-7", "edge-8",
];
const TIMEOUT: Duration = Duration::from_secs(60);

/// `args` with each `--flag=` of `swap` given its new value, and the flags in `drop` left out.
fn swap(args: Vec<String>, swap: &[(&str, String)], drop: &[&str]) -> Vec<String> {
    (args.into_iter())
        .filter(|a| !drop.iter().any(|d| a.starts_with(&format!("{d}="))))
        .map(|a| {
            (swap.iter())
                .find(|(flag, _)| a.starts_with(&format!("{flag}=")))
                .map_or(a.clone(), |(flag, value)| format!("{flag}={value}"))
        })
        .collect()
}

/// Starts the replica of Pod `pod` from the chart's `args`. It listens on loopback with
/// the test's certificate; its shard URL, which names its Pod under the headless Service
/// (checked by the rendering tests), becomes that loopback address (the hub's default
/// for a concrete --listen), which the agents here can reach.
async fn replica(args: &[String], pod: &str, pki: &Pki, sim: &KubeSim) -> Hub {
    let mut args = swap(
        expand(args, &[("POD_NAME", pod)]),
        &[
            ("--listen", "127.0.0.1:0".to_owned()),
            ("--admin-listen", "127.0.0.1:0".to_owned()),
            ("--tls-cert", pki.server_cert.display().to_string()),
            ("--tls-key", pki.server_key.display().to_string()),
        ],
        &["--shard-url"],
    );
    // The downward API's POD_NAME and POD_NAMESPACE; state flushed every second.
    args.extend([
        format!("--pod-name={pod}"),
        format!("--pod-namespace={NAMESPACE}"),
        "--seq-flush-seconds=1".to_owned(),
    ]);
    let argv = std::iter::once("fleetpulse-hub".to_owned()).chain(args.clone());
    let cli = fleetpulse_hub::cli::Cli::try_parse_from(argv)
        .unwrap_or_else(|e| panic!("the hub refuses {args:?}:\n{e}"));
    let fleetpulse_hub::cli::Command::Serve(serve) = cli.command else {
        panic!("the chart runs `fleetpulse-hub serve`")
    };
    let mut options = serve.options();
    options.kube = Some(sim.client());
    Hub::start(options).await.unwrap()
}

async fn holders(leases: &Api<Lease>) -> BTreeMap<String, usize> {
    let params = ListParams::default().labels("fleetpulse.io/shard-lease=true");
    let list = leases.list(&params).await.unwrap();
    (list.items.into_iter())
        .filter_map(|l| l.spec?.holder_identity)
        .fold(BTreeMap::new(), |mut m, h| {
            *m.entry(h).or_default() += 1;
            m
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replicas_calls_stay_within_the_rendered_rbac_and_use_all_of_the_shard_roles() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::generate(dir.path()).unwrap();
    let sim = KubeSim::new();
    let client = sim.client();
    let keys = management_cluster(&client, &NAMES).await;
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();

    let docs: Vec<Value> = documents(&render(
        Chart::Hub,
        &strings(&[
            "--set",
            "sharding.enabled=true",
            "--set",
            &format!("sharding.shards={SHARDS}"),
            "--set",
            "replicas=2",
            "--set",
            "sharding.leaseDurationSeconds=3",
        ]),
    ));
    let args = args_of(one(&docs, "StatefulSet"));
    let mark = sim.requests().len();
    let first = replica(&args, PODS[0], &pki, &sim).await;
    let second = replica(&args, PODS[1], &pki, &sim).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    eventually(TIMEOUT, || async {
        let h = holders(&leases).await;
        (h.len() == 2 && h.values().all(|&n| n == SHARDS as usize / 2)).then_some(())
    })
    .await
    .expect("two replicas balance the shards, half each");
    // At balance nothing moves: some of the clusters are the second replica's, so some
    // heartbeats below reach it only through the first one's redirect.
    let params = ListParams::default().labels("fleetpulse.io/shard-lease=true");
    let owner: BTreeMap<String, String> = (leases.list(&params).await.unwrap().items)
        .into_iter()
        .filter_map(|l| Some((l.metadata.name?, l.spec?.holder_identity?)))
        .collect();
    let owners: BTreeSet<&str> = (NAMES.iter())
        .map(|n| {
            let k = fleetpulse_hub::ids::shard_of(&ClusterId::new("fleet", *n), SHARDS);
            owner[&format!("fleetpulse-shard-{k}")].as_str()
        })
        .collect();
    assert_eq!(owners, BTreeSet::from(PODS), "both replicas own clusters");

    // Every agent reaches the first replica (as through the shared Service) and follows
    // its redirect when the second owns the cluster's shard.
    let ca = std::fs::read(&pki.ca_cert).unwrap();
    let http = reqwest::Client::builder()
        .tls_backend_preconfigured(fleetpulse_agent::tls::client_config(Some(&ca)).unwrap())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let url = format!("https://localhost:{}", first.addr.port());
    let mut agents: Vec<HandAgent> = (keys.into_iter())
        .map(|(name, key)| {
            let cluster = SimCluster {
                id: ClusterId::new("fleet", name),
                key,
            };
            HandAgent::new(http.clone(), &url, &cluster)
        })
        .collect();
    for agent in &mut agents {
        let status = eventually(TIMEOUT, || {
            let sent = agent.next_heartbeat(false).send();
            async move {
                sent.await
                    .ok()
                    .filter(|r| r.status() == 200)
                    .map(|r| r.status())
            }
        })
        .await;
        assert!(
            status.is_some(),
            "every heartbeat is accepted by its shard's owner"
        );
    }
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let state = ListParams::default().labels("fleetpulse.io/hub-state");
    eventually(TIMEOUT, || async {
        let n = maps.list(&state).await.unwrap().items.len();
        (n > 0).then_some(())
    })
    .await
    .expect("the owners flush their shards' state");

    // The second replica stops: it releases its shards, the first takes them over.
    second.shutdown().await;
    eventually(TIMEOUT, || async {
        let h = holders(&leases).await;
        (h.get(PODS[0]) == Some(&(SHARDS as usize))).then_some(())
    })
    .await
    .expect("the remaining replica takes every shard");
    first.shutdown().await;

    let requests = sim.requests()[mark..].to_vec();
    let grants = rbac::grants(&docs, &Chart::Hub.fullname(), NAMESPACE);
    let denied = rbac::denied(&grants, &requests);
    assert!(
        denied.is_empty(),
        "the sharded chart does not grant calls the replicas made: {denied:#?}"
    );
    let mut unused: Vec<String> = rbac::unused(&grants, &requests)
        .into_iter()
        .filter(|g| g.contains("-shards:") || g.contains("-state:"))
        .collect();
    // Server-side apply's first write of a state object: the API server also asks for
    // create, kubesim records the patch only.
    unused.retain(|g| !g.ends_with(": create core/configmaps"));
    assert!(
        unused.is_empty(),
        "the shard Lease and state Roles grant what the replicas never used: {unused:#?}"
    );
}

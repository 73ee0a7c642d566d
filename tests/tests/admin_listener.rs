//! The two listeners of the real `fleetpulse-hub serve`: the agents' port serves only what
//! agents call (and the probes), so the read API and `/metrics` are not there at all
//! (404); the admin port serves them to callers it authenticates: the bearer token of
//! `--admin-token-file` in embedded mode (401 without it or with another one), and in
//! Kubernetes mode the caller's Kubernetes token, reviewed by the management cluster
//! (TokenReview: 401 for a token it does not know; SubjectAccessReview: 403 for a user
//! RBAC does not allow, 200 for one it does).

use std::time::Duration;

use serde_json::Value;

use fleetpulse_kubesim::KubeSim;
use fleetpulse_tests::admin_api::get;
use fleetpulse_tests::embedded_hub::{ADMIN_LINE, EmbeddedHub};
use fleetpulse_tests::management::management_cluster;
use fleetpulse_tests::pki::Pki;
use fleetpulse_tests::process::{self, Running};
use fleetpulse_tests::{fleet, wait};

const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `fleetpulse-hub args` to its end, whatever its exit status.
fn hub_cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(process::binary("fleetpulse-hub").unwrap())
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}
const TOKEN: &str = "kq3V9x-admin-token-for-the-test";

/// The `code` of a JSON error body.
fn code(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    value["code"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_port_has_no_read_api_and_the_admin_port_needs_the_token_file_token() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::generate(dir.path()).unwrap();
    let manifests = dir.path().join("manifests");
    fleet::write_clusters(&manifests, 1, 1, 4).unwrap();
    let token_file = dir.path().join("admin-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let token_arg = token_file.display().to_string();
    let data = dir.path().join("data");
    let extra = ["--admin-token-file", &token_arg];
    let hub = tokio::task::block_in_place(|| EmbeddedHub::spawn(&manifests, &data, &pki, &extra))
        .unwrap();
    let ca = pki.ca_cert.clone();
    let list = format!("{}/v1/memberclusters", hub.admin);
    wait::until_some("the admin API to list the cluster", DEADLINE, || async {
        let (status, body) = get(&ca, &list, Some(TOKEN)).await.ok()?;
        (status == 200 && body.contains("edge-1")).then_some(())
    })
    .await
    .unwrap();

    // The agents' port: the probes, and nothing that reads the fleet back.
    let (status, _) = get(&ca, &format!("{}/healthz", hub.server), None)
        .await
        .unwrap();
    assert_eq!(status, 200, "the agents' port answers");
    for path in [
        "/v1/memberclusters",
        "/metrics",
        "/v1/hub",
        "/v1/clustersets",
    ] {
        for token in [None, Some(TOKEN)] {
            let url = format!("{}{path}", hub.server);
            let (status, body) = get(&ca, &url, token).await.unwrap();
            assert_eq!(
                status, 404,
                "{path} on the agents' port (token {token:?}): {body}"
            );
        }
    }

    // The admin port: 401 without the token or with another one, naming the fix.
    for path in ["/v1/memberclusters", "/metrics", "/v1/hub"] {
        let url = format!("{}{path}", hub.admin);
        let (status, body) = get(&ca, &url, None).await.unwrap();
        assert_eq!(status, 401, "{path} without a token: {body}");
        assert_eq!(code(&body), "unauthenticated", "{body}");
        assert!(body.contains("Authorization: Bearer"), "{body}");
        let (status, body) = get(&ca, &url, Some("kq3V9x-admin-token-for-the-tesT"))
            .await
            .unwrap();
        assert_eq!(status, 401, "{path} with a wrong token: {body}");
        assert_eq!(code(&body), "unauthenticated", "{body}");
        assert!(!body.contains(TOKEN), "the token is never echoed: {body}");
    }
    let metrics = format!("{}/metrics", hub.admin);
    let (status, body) = get(&ca, &metrics, Some(TOKEN)).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("fleetpulse_hub_"), "{body}");

    // The CLI reads the admin port with --token-file, and without it says why it failed.
    let ca_arg = ca.display().to_string();
    let token_arg = token_file.display().to_string();
    let args = ["get", "mc", "--server", &hub.admin, "--ca", &ca_arg];
    let refused = hub_cli(&args);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("401") && stderr.contains("unauthenticated"),
        "{stderr}"
    );
    let with_token: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--token-file", &token_arg])
        .collect();
    let table = process::run("fleetpulse-hub", &with_token).unwrap();
    let stdout = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    assert!(stdout.lines().any(|l| l.contains("edge-1")), "{stdout}");
    // Pointed at the agents' port, it says where to look instead.
    let agents_port = ["get", "mc", "--server", &hub.server, "--ca", &ca_arg];
    let wrong = hub_cli(&agents_port);
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        stderr.contains("404") && stderr.contains("--admin-listen"),
        "{stderr}"
    );

    let log = hub.process.log_line(ADMIN_LINE).unwrap_or_default();
    assert!(log.contains("bearer token file"), "{log}");
    assert!(
        hub.process.log_line(TOKEN).is_none(),
        "the hub never logs the token"
    );
}

#[test]
fn an_embedded_hub_refuses_to_serve_its_admin_api_on_a_public_address_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let (m, d) = (dir.path().join("m"), dir.path().join("d"));
    std::fs::create_dir_all(&m).unwrap();
    let (m, d) = (m.display().to_string(), d.display().to_string());
    let out = hub_cli(&[
        "serve",
        "--manifests",
        &m,
        "--data",
        &d,
        "--insecure-http",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "0.0.0.0:0",
    ]);
    assert!(!out.status.success(), "the hub refuses to start");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("--admin-token-file"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_kubernetes_mode_the_admin_port_admits_what_token_review_and_rbac_allow() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::generate(dir.path()).unwrap();
    let sim = KubeSim::new();
    management_cluster(&sim.client(), &["edge-1"]).await;
    // Who the management cluster knows: a monitoring ServiceAccount allowed to read the
    // read API and /metrics, and a developer it authenticates but RBAC does not allow.
    let reader = "system:serviceaccount:monitoring:prometheus";
    sim.add_token("reader-token", reader, &["system:serviceaccounts"]);
    sim.add_token("developer-token", "jane@example.com", &["developers"]);
    sim.allow_non_resource(reader, "get", "/v1/*");
    sim.allow_non_resource("system:serviceaccounts", "get", "/metrics");
    let (addr, _served) = sim.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let kubeconfig = dir.path().join("mgmt.kubeconfig");
    std::fs::write(
        &kubeconfig,
        fleetpulse_kubesim::kubeconfig(&format!("http://{addr}")),
    )
    .unwrap();
    let path = |p: &std::path::Path| p.display().to_string();
    let args = [
        "serve".to_owned(),
        "--kube".into(),
        "--kubeconfig".into(),
        path(&kubeconfig),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--admin-listen".into(),
        "127.0.0.1:0".into(),
        "--admin-auth".into(),
        "kubernetes".into(),
        "--tls-cert".into(),
        path(&pki.server_cert),
        "--tls-key".into(),
        path(&pki.server_key),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut hub = Running::spawn_logged("fleetpulse-hub", "hub", &args).unwrap();
    let admin = wait::until_some("the hub to serve", DEADLINE, || {
        let (serving, exited) = (hub.log_line("hub serving"), hub.exited());
        assert!(exited.is_none(), "the hub exited (its log is above)");
        let admin = hub.logged_addr(ADMIN_LINE);
        async move { serving.and(admin) }
    })
    .await
    .unwrap()
    .0;
    let admin = format!("https://localhost:{}", admin.port());
    let ca = pki.ca_cert.clone();
    let list = format!("{admin}/v1/memberclusters");

    let (status, body) = get(&ca, &list, None).await.unwrap();
    assert_eq!(
        (status, code(&body)),
        (401, "unauthenticated".into()),
        "{body}"
    );
    let (status, body) = get(&ca, &list, Some("a-token-nobody-issued"))
        .await
        .unwrap();
    assert_eq!(
        (status, code(&body)),
        (401, "unauthenticated".into()),
        "{body}"
    );
    assert!(body.contains("did not authenticate"), "{body}");
    let (status, body) = get(&ca, &list, Some("developer-token")).await.unwrap();
    assert_eq!((status, code(&body)), (403, "forbidden".into()), "{body}");
    assert!(
        body.contains("jane@example.com") && body.contains("/v1/memberclusters"),
        "{body}"
    );
    let (status, body) = get(&ca, &list, Some("reader-token")).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("edge-1"), "{body}");
    // RBAC decides per path: the developer's groups may get /metrics only if a rule says
    // so, and the reader's /metrics comes from its ServiceAccounts group.
    let metrics = format!("{admin}/metrics");
    let (status, body) = get(&ca, &metrics, Some("reader-token")).await.unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, _) = get(&ca, &metrics, Some("developer-token")).await.unwrap();
    assert_eq!(status, 403);
    // The console: its page loads without a token; what it shows needs the same review as
    // the read API.
    let (status, body) = get(&ca, &format!("{admin}/console/"), None).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("fleetpulse console"), "{body}");
    let cluster = format!("{admin}/v1/console/clusters/fleet/edge-1");
    let (status, _) = get(&ca, &cluster, None).await.unwrap();
    assert_eq!(status, 401);
    let (status, _) = get(&ca, &cluster, Some("developer-token")).await.unwrap();
    assert_eq!(status, 403);
    let (status, body) = get(&ca, &cluster, Some("reader-token")).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"id\":\"fleet/edge-1\""), "{body}");

    let reviews: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.resource.ends_with("reviews"))
        .map(|r| (r.verb, r.group, r.resource))
        .collect();
    assert!(
        reviews.contains(&(
            "create".into(),
            "authentication.k8s.io".into(),
            "tokenreviews".into()
        )) && reviews.contains(&(
            "create".into(),
            "authorization.k8s.io".into(),
            "subjectaccessreviews".into()
        )),
        "{reviews:?}"
    );
    assert!(
        hub.terminate(Duration::from_secs(20)).unwrap(),
        "a clean stop"
    );
}

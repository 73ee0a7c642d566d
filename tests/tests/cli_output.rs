//! What the real binaries print: an ordinary error is one line, without a backtrace even
//! with `RUST_BACKTRACE=1`, unless `-v` asks for every cause and the backtrace; the hub's
//! and the agent's JSON logs have one shape and no colour when stderr is not a terminal;
//! the agent finds its cluster through `$KUBECONFIG`, as every Kubernetes tool does.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::Api;
use serde_json::{Value, json};

use fleetpulse_kubesim::{KubeSim, kubeconfig};
use fleetpulse_tests::management::create;
use fleetpulse_tests::process::binary;
use fleetpulse_tests::wait;

/// Runs a binary to its end with `env`; (exit code, stderr).
fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = Command::new(binary(name).unwrap())
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

const AGENT_RUN: &[&str] = &[
    "run",
    "--hub",
    "http://127.0.0.1:9",
    "--insecure-http",
    "--cluster",
    "fleet/edge-1",
];

#[test]
fn an_ordinary_error_is_one_line_and_the_backtrace_needs_verbose() {
    let env = [
        ("KUBECONFIG", "/nonexistent/kubeconfig"),
        ("RUST_BACKTRACE", "1"),
    ];
    let (code, stderr) = run("fleetpulse-agent", AGENT_RUN, &env);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line:\n{stderr}");
    assert!(
        stderr.starts_with("error: cannot read $KUBECONFIG (/nonexistent/kubeconfig)"),
        "{stderr}"
    );
    assert!(!stderr.contains("backtrace"), "{stderr}");

    let verbose: Vec<&str> = std::iter::once("-v")
        .chain(AGENT_RUN.iter().copied())
        .collect();
    let (code, stderr) = run("fleetpulse-agent", &verbose, &env);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("Caused by:"), "{stderr}");
    assert!(stderr.contains("Stack backtrace:"), "{stderr}");

    let (code, stderr) = run(
        "fleetpulse-hub",
        &["get", "mc", "--server", "http://127.0.0.1:9"],
        &[("RUST_BACKTRACE", "1")],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line:\n{stderr}");
    assert!(
        stderr.starts_with("error: cannot reach the hub at http://127.0.0.1:9/v1/memberclusters"),
        "{stderr}"
    );
}

/// Starts a binary and returns its first `n` stderr lines (then kills it).
fn first_lines(mut command: Command, n: usize) -> Vec<String> {
    let mut child: Child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines: Vec<String> = BufReader::new(child.stderr.take().unwrap())
        .lines()
        .take(n)
        .map(Result::unwrap)
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    lines
}

fn assert_log_shape(who: &str, lines: &[String]) {
    assert!(!lines.is_empty(), "{who} logged nothing");
    for line in lines {
        assert!(
            !line.contains('\u{1b}'),
            "{who}: colour on a pipe: {line:?}"
        );
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{who}: not a JSON line ({e}): {line}"));
        for key in ["timestamp", "level", "target", "message"] {
            assert!(v[key].is_string(), "{who}: no string {key}: {line}");
        }
        for nested in ["fields", "span", "spans"] {
            assert!(v.get(nested).is_none(), "{who}: nested {nested}: {line}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_reads_kubeconfig_and_both_binaries_log_json_in_one_shape() {
    let sim = KubeSim::new();
    create(
        &Api::<Namespace>::all(sim.client()),
        json!({"metadata": {"name": "fleetpulse-system"}}),
    )
    .await;
    let (addr, _server) = sim.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, kubeconfig(&format!("http://{addr}"))).unwrap();

    // No --kubeconfig, no --key-file: the agent keeps its key in a Secret of the cluster
    // $KUBECONFIG names.
    let mut agent = Command::new(binary("fleetpulse-agent").unwrap());
    agent
        .args(AGENT_RUN)
        .args(["--log-format", "json"])
        .env("KUBECONFIG", &kc);
    let lines = tokio::task::spawn_blocking(move || first_lines(agent, 2));
    let secrets: Api<Secret> = Api::namespaced(sim.client(), "fleetpulse-system");
    wait::until_some("the agent's key Secret", Duration::from_secs(30), || {
        let secrets = secrets.clone();
        async move { secrets.get_opt("fleetpulse-agent-key").await.ok().flatten() }
    })
    .await
    .unwrap();
    let agent_lines = lines.await.unwrap();
    assert_log_shape("agent", &agent_lines);

    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let mut hub = Command::new(binary("fleetpulse-hub").unwrap());
    hub.args([
        "serve",
        "--insecure-http",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--log-format",
        "json",
    ])
    .arg("--manifests")
    .arg(&manifests)
    .arg("--data")
    .arg(dir.path().join("data"));
    let hub_lines = tokio::task::spawn_blocking(move || first_lines(hub, 1))
        .await
        .unwrap();
    assert_log_shape("hub", &hub_lines);
}

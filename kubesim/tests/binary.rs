//! The `kubesim` binary writes a usable kubeconfig and exits cleanly on SIGTERM.

use fleetpulse_kubesim::eventually;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client, Config,
    api::ListParams,
    config::{KubeConfigOptions, Kubeconfig},
};
use std::{process::Stdio, time::Duration};

#[tokio::test]
async fn binary_serves_cluster_described_by_written_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig.yaml");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubesim"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--nodes",
            "2",
            "--kubeconfig-out",
        ])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let yaml = eventually(Duration::from_secs(10), || async {
        tokio::fs::read_to_string(&path)
            .await
            .ok()
            .filter(|s| s.contains("server:"))
    })
    .await
    .expect("kubeconfig written within 10s");
    let kc = Kubeconfig::from_yaml(&yaml).unwrap();
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(Client::try_from(config).unwrap());
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );

    let pid = child.id().unwrap().to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "kubesim exited with {status}");
}

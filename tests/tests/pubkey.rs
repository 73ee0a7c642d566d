//! `fleetpulse-agent pubkey --from-secret`, the real binary against a simulated cluster:
//! it prints the public key of the key the agent keeps in its Secret, and a missing Secret
//! is an error naming it.

use std::process::{Command, Stdio};

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::Api;
use serde_json::json;

use fleetpulse_common::protocol::keys;
use fleetpulse_kubesim::{KubeSim, kubeconfig};
use fleetpulse_tests::management::create;
use fleetpulse_tests::process::binary;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubkey_from_secret_prints_the_public_key_of_the_agents_key_secret() {
    let sim = KubeSim::new();
    create(
        &Api::<Namespace>::all(sim.client()),
        json!({"metadata": {"name": "fleetpulse-system"}}),
    )
    .await;
    let key = keys::generate();
    create(
        &Api::<Secret>::namespaced(sim.client(), "fleetpulse-system"),
        // `data`, as the API server stores it (the simulator does not fold stringData).
        serde_json::to_value(Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("fleetpulse-agent-key".into()),
                ..Default::default()
            },
            data: Some(
                [(
                    "key.pem".to_owned(),
                    k8s_openapi::ByteString(keys::to_pem(&key).into_bytes()),
                )]
                .into(),
            ),
            ..Default::default()
        })
        .unwrap(),
    )
    .await;
    let (addr, _server) = sim.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, kubeconfig(&format!("http://{addr}"))).unwrap();

    let pubkey = move |secret: &str| {
        let out = Command::new(binary("fleetpulse-agent").unwrap())
            .args(["pubkey", "--from-secret", secret, "--kubeconfig"])
            .arg(&kc)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let first = pubkey.clone();
    let (ok, stdout, stderr) =
        tokio::task::spawn_blocking(move || first("fleetpulse-system/fleetpulse-agent-key"))
            .await
            .unwrap();
    assert!(ok, "{stderr}");
    assert_eq!(
        stdout,
        format!("{}\n", keys::public_key_string(&key.verifying_key()))
    );

    let (ok, _, stderr) = tokio::task::spawn_blocking(move || pubkey("fleetpulse-system/missing"))
        .await
        .unwrap();
    assert!(!ok);
    assert!(stderr.contains("fleetpulse-system/missing"), "{stderr}");
}

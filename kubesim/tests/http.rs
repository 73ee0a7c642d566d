//! kubesim over a real socket, reached through a kubeconfig, as the binaries use it.

use fleetpulse_kubesim::{KubeSim, kubeconfig};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

#[tokio::test]
async fn client_from_written_kubeconfig_reaches_served_cluster() {
    let sim = KubeSim::new();
    let (addr, server) = sim.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let yaml = kubeconfig(&format!("http://{addr}"));
    let kc = Kubeconfig::from_yaml(&yaml).unwrap();
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    assert_eq!(config.default_namespace, "default");
    let client = Client::try_from(config).unwrap();
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
    let ns: Api<Namespace> = Api::all(client);
    let ks = ns.get("kube-system").await.unwrap();
    assert_eq!(ks.metadata.uid.unwrap(), sim.cluster_uid());
    server.abort();
}

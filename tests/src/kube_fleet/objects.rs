//! The objects a [`super::KubeFleet`] run starts from: the fleetpulse CRDs, the `fleet`
//! namespace, one MemberCluster per member with its agent's pre-shared public key, an
//! optional HealthPolicy, the ClusterSet; in each member cluster, the agent's key Secret;
//! and a KeptnMetric CRD and objects for per-cluster metric checks.

use ed25519_dalek::SigningKey;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use fleetpulse_common::api::{ClusterSet, HealthPolicy, MemberCluster, crds};
use fleetpulse_common::protocol::keys;

use super::{CLUSTER_SET, FleetSpec, NAMESPACE};

/// Namespace of the agent's key Secret and of pod-check pods in each member cluster (the
/// agent's defaults).
pub const AGENT_NAMESPACE: &str = "fleetpulse-system";
/// Name of the agent's key Secret (the agent's default `--key-secret`).
pub const KEY_SECRET: &str = "fleetpulse-agent-key";
/// Label every MemberCluster carries; the ClusterSet selects on it.
pub const REGION_LABEL: &str = "region";

/// Creates an object given as JSON.
pub async fn create<K>(api: &Api<K>, value: Value) -> anyhow::Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value)?;
    Ok(api.create(&PostParams::default(), &object).await?)
}

/// Creates a namespace.
pub async fn namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": name}}),
    )
    .await?;
    Ok(())
}

/// Installs the fleetpulse CRDs, the `fleet` namespace, one MemberCluster per entry of
/// `members` (name and agent key), the spec's HealthPolicy (when it has checks) and the
/// ClusterSet `primary` (maxReplicas 1, selecting every member).
pub async fn install_hub_objects(
    client: &kube::Client,
    spec: &FleetSpec,
    members: &[(String, SigningKey)],
) -> anyhow::Result<()> {
    for crd in crds::all() {
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd)
            .await?;
    }
    namespace(client, NAMESPACE).await?;
    install_members(client, spec, members, 1).await?;
    if !spec.liveness_checks.is_empty() {
        create(
            &Api::<HealthPolicy>::namespaced(client.clone(), NAMESPACE),
            json!({
                "apiVersion": "fleetpulse.io/v1alpha1", "kind": "HealthPolicy",
                "metadata": {"name": "platform", "namespace": NAMESPACE},
                "spec": {"clusterSelector": {}, "livenessChecks": spec.liveness_checks}
            }),
        )
        .await?;
    }
    create(
        &Api::<ClusterSet>::all(client.clone()),
        json!({
            "apiVersion": "fleetpulse.io/v1alpha1", "kind": "ClusterSet",
            "metadata": {"name": CLUSTER_SET},
            "spec": {"clusterSelector": {"matchLabels": {(REGION_LABEL): "eu"}}, "maxReplicas": 1}
        }),
    )
    .await?;
    Ok(())
}

/// One MemberCluster in [`NAMESPACE`] per entry of `members` (name and agent key), labelled
/// `region: eu`, with the spec's interval and grace period; `parallel` creates at a time.
pub async fn install_members(
    client: &kube::Client,
    spec: &FleetSpec,
    members: &[(String, SigningKey)],
    parallel: usize,
) -> anyhow::Result<()> {
    use futures::{StreamExt, TryStreamExt};

    let clusters: Api<MemberCluster> = Api::namespaced(client.clone(), NAMESPACE);
    futures::stream::iter(members)
        .map(|(name, key)| {
            let public_key = keys::public_key_string(&key.verifying_key());
            let object = json!({
                "apiVersion": "fleetpulse.io/v1alpha1", "kind": "MemberCluster",
                "metadata": {"name": name, "namespace": NAMESPACE, "labels": {(REGION_LABEL): "eu"}},
                "spec": {"heartbeat": {"intervalSeconds": spec.interval_secs,
                                       "gracePeriodSeconds": spec.grace_secs},
                         "agent": {"publicKeys": [{"publicKey": public_key}]}}
            });
            let clusters = &clusters;
            async move { create(clusters, object).await }
        })
        .buffered(parallel.max(1))
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// For adoption: the mirror CRDs, the enrolment namespace, and one SveltosCluster per name
/// in [`NAMESPACE`], labelled `region: eu` (so the ClusterSet selects what the hub adopts).
pub async fn install_adopted(client: &kube::Client, names: &[&str]) -> anyhow::Result<()> {
    crate::mirror_objects::install_crds(client).await?;
    namespace(client, AGENT_NAMESPACE).await?;
    let kind = fleetpulse_hub::mirrors::MirrorKind::SveltosCluster;
    let (group, version) = kind.api_version().rsplit_once('/').unwrap_or_default();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind.kind()),
        kind.plural(),
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    for name in names {
        create(
            &api,
            json!({
                "apiVersion": kind.api_version(), "kind": kind.kind(),
                "metadata": {"name": name, "namespace": NAMESPACE,
                             "labels": {(REGION_LABEL): "eu", "team": "payments"}},
                "spec": {"kubeconfigName": format!("{name}-kubeconfig")}
            }),
        )
        .await?;
    }
    Ok(())
}

/// Puts the agent's key into its Secret in the member cluster, where `fleetpulse-agent run`
/// without `--key-file` reads it (as the Helm chart deploys it), so the MemberCluster can
/// list the public key before the agent starts.
pub async fn install_agent_key(client: &kube::Client, key: &SigningKey) -> anyhow::Result<()> {
    namespace(client, AGENT_NAMESPACE).await?;
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(KEY_SECRET.into()),
            namespace: Some(AGENT_NAMESPACE.into()),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(
            [(
                fleetpulse_agent::key_secret::KEY_FIELD.to_owned(),
                k8s_openapi::ByteString(keys::to_pem(key).into_bytes()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), AGENT_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await?;
    Ok(())
}

/// Namespace of the KeptnMetric objects.
pub const KEPTN_NAMESPACE: &str = "keptn";

fn keptn_metric_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("metrics.keptn.sh", "v1", "KeptnMetric"),
        "keptnmetrics",
    )
}

/// Registers the KeptnMetric CRD (`metrics.keptn.sh/v1`, namespaced, with a status
/// subresource whose `value` is a string, as Keptn writes it) and the `keptn` namespace.
pub async fn install_keptn_metric_crd(client: &kube::Client) -> anyhow::Result<()> {
    create(
        &Api::<CustomResourceDefinition>::all(client.clone()),
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "keptnmetrics.metrics.keptn.sh"},
            "spec": {"group": "metrics.keptn.sh", "scope": "Namespaced",
                     "names": {"plural": "keptnmetrics", "singular": "keptnmetric", "kind": "KeptnMetric"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": true}},
                                   "subresources": {"status": {}}}]}
        }),
    )
    .await?;
    namespace(client, KEPTN_NAMESPACE).await
}

/// Sets KeptnMetric `name`'s `status.value`, creating the object first if it is missing
/// (the metrics operator writes the value through the status subresource).
pub async fn set_keptn_metric(
    client: &kube::Client,
    name: &str,
    value: &str,
) -> anyhow::Result<()> {
    let resource = keptn_metric_resource();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), KEPTN_NAMESPACE, &resource);
    if api.get_opt(name).await?.is_none() {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "metrics.keptn.sh/v1", "kind": "KeptnMetric",
            "metadata": {"name": name, "namespace": KEPTN_NAMESPACE},
            "spec": {"provider": {"name": "prometheus"}, "query": "availability", "fetchIntervalSeconds": 5}
        }))?;
        api.create(&PostParams::default(), &object).await?;
    }
    let patch = Patch::Merge(json!({"status": {"value": value}}));
    api.patch_status(name, &PatchParams::default(), &patch)
        .await?;
    Ok(())
}

//! The agent's key kept in a Secret of its own namespace, for agents installed without a
//! key file: generated on first start, reused after restarts, never leaving the cluster.
//! Two replicas starting at once cannot end up with different keys: creating the Secret
//! fails for the second, which then reads the first one's.

use std::collections::BTreeMap;

use ed25519_dalek::SigningKey;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};

use fleetpulse_common::protocol::keys::{self, KeyId};

/// Data key of the PEM private key in the Secret.
pub const KEY_FIELD: &str = "key.pem";

/// The key Secret could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum KeySecretError {
    /// The API refused (e.g. RBAC).
    #[error("Secret {namespace}/{name}: {source}; the agent needs get and create on this Secret")]
    Api {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The Secret holds no usable key.
    #[error(
        "Secret {namespace}/{name} has no valid {KEY_FIELD}: {problem}; delete it to have a new key generated"
    )]
    Invalid {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What is wrong.
        problem: String,
    },
}

/// Reads the key from Secret `namespace/name`, creating the Secret with a new key if it does
/// not exist. Returns the key and whether it was just created.
pub async fn load_or_create(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> Result<(SigningKey, bool), KeySecretError> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let api_err = |source| KeySecretError::Api {
        namespace: namespace.into(),
        name: name.into(),
        source,
    };
    if let Some(secret) = api.get_opt(name).await.map_err(api_err)? {
        return parse(&secret, namespace, name).map(|k| (k, false));
    }
    let key = keys::generate();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".into(),
                "fleetpulse-agent".into(),
            )])),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            KEY_FIELD.into(),
            ByteString(keys::to_pem(&key).into_bytes()),
        )])),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(
                secret = %format!("{namespace}/{name}"),
                public_key = %keys::public_key_string(&key.verifying_key()),
                key_id = %KeyId::of(&key.verifying_key()),
                "generated the agent key; add the public key to the MemberCluster's spec.agent.publicKeys"
            );
            Ok((key, true))
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let secret = api.get(name).await.map_err(api_err)?;
            parse(&secret, namespace, name).map(|k| (k, false))
        }
        Err(source) => Err(api_err(source)),
    }
}

/// Reads the key from Secret `namespace/name`, which must exist.
pub async fn read(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> Result<SigningKey, KeySecretError> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let secret = api
        .get_opt(name)
        .await
        .map_err(|source| KeySecretError::Api {
            namespace: namespace.into(),
            name: name.into(),
            source,
        })?;
    let Some(secret) = secret else {
        return Err(KeySecretError::Invalid {
            namespace: namespace.into(),
            name: name.into(),
            problem: "no such Secret (the agent creates it on its first start)".into(),
        });
    };
    parse(&secret, namespace, name)
}

fn parse(secret: &Secret, namespace: &str, name: &str) -> Result<SigningKey, KeySecretError> {
    let invalid = |problem: String| KeySecretError::Invalid {
        namespace: namespace.into(),
        name: name.into(),
        problem,
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(KEY_FIELD))
        .ok_or_else(|| invalid(format!("no {KEY_FIELD} entry")))?;
    let pem = std::str::from_utf8(&bytes.0).map_err(|_| invalid("not UTF-8".into()))?;
    keys::from_pem(pem).map_err(|e| invalid(e.to_string()))
}

/// The managed cluster's UID: the UID of its `kube-system` namespace (stable for the life of
/// the cluster, new when it is rebuilt), or `None` if it cannot be read.
pub async fn cluster_uid(client: kube::Client) -> Option<String> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    match api.get("kube-system").await {
        Ok(ns) => ns.metadata.uid,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the kube-system namespace UID; reporting no cluster UID");
            None
        }
    }
}

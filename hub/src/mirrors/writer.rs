//! Writes what the plan wants onto one mirror object, through the dynamic API: labels by
//! server-side apply under the field manager `fleetpulse-hub` (a label fleetpulse no longer
//! wants is removed by applying without it; other managers' labels are never sent), and
//! fleetpulse's own taint by read-modify-write of `spec.taints` conditional on the
//! `resourceVersion` just read (taint lists are atomic in these CRDs), retried on 409.
//! Nothing is written when the object already holds what is wanted, and nothing is ever
//! created: every write carries the `resourceVersion` of the object it read.

use std::collections::HashMap;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::kind::MirrorKind;
use super::plan::{Observed, Wanted, labels_need_apply, taints_after};

/// The field manager of every mirror write.
pub const FIELD_MANAGER: &str = "fleetpulse-hub";

/// Why writing one mirror object failed.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// The API server does not serve the kind (its tool's CRDs are not installed).
    #[error(
        "{object}: the API server does not serve this kind ({source}); install the tool's CRDs on the mirror cluster or remove the mirror"
    )]
    KindNotServed {
        /// The object.
        object: String,
        /// What discovery said.
        source: kube::Error,
    },
    /// The object does not exist.
    #[error(
        "{object} does not exist; create it or correct the mirror reference: fleetpulse writes it once it exists and never creates it"
    )]
    NotFound {
        /// The object.
        object: String,
    },
    /// RBAC refused the hub.
    #[error(
        "{object}: the hub may not {verb} it ({source}); enable the kind in the chart's mirrors values (or grant get and patch on it to the hub's ServiceAccount)"
    )]
    Forbidden {
        /// The object.
        object: String,
        /// The refused verb.
        verb: &'static str,
        /// The API's answer.
        source: kube::Error,
    },
    /// The object changed between read and write too often in a row (409 each time).
    #[error("{object}: {verb} kept conflicting with other writers ({source}); retrying")]
    Conflict {
        /// The object.
        object: String,
        /// The conflicting verb.
        verb: &'static str,
        /// The API's answer.
        source: kube::Error,
    },
    /// Any other API failure (unreachable API server, 5xx, invalid object).
    #[error("{object}: {verb} failed: {source}")]
    Api {
        /// The object.
        object: String,
        /// The failed verb.
        verb: &'static str,
        /// The API's answer.
        source: kube::Error,
    },
}

impl MirrorError {
    /// The stable reason used in the `Mirrored` condition, Events and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::KindNotServed { .. } => "KindNotServed",
            Self::NotFound { .. } => "MirrorNotFound",
            Self::Forbidden { .. } => "Forbidden",
            Self::Conflict { .. } => "Conflict",
            Self::Api { .. } => "WriteFailed",
        }
    }

    fn from_api(object: &str, verb: &'static str, source: kube::Error) -> Self {
        let object = object.to_owned();
        match &source {
            kube::Error::Api(s) if s.code == 403 => Self::Forbidden {
                object,
                verb,
                source,
            },
            kube::Error::Api(s) if s.code == 404 => Self::NotFound { object },
            kube::Error::Api(s) if s.code == 409 => Self::Conflict {
                object,
                verb,
                source,
            },
            _ => Self::Api {
                object,
                verb,
                source,
            },
        }
    }
}

/// One mirror object, resolved: its kind, namespace (empty when cluster-scoped) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    /// The kind.
    pub kind: MirrorKind,
    /// The namespace, empty for cluster-scoped kinds.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl Target {
    /// `kind apiVersion namespace/name` (or `kind apiVersion name`), for messages.
    pub fn describe(&self) -> String {
        let (k, v) = (self.kind.kind(), self.kind.api_version());
        if self.namespace.is_empty() {
            format!("{k} {v} {}", self.name)
        } else {
            format!("{k} {v} {}/{}", self.namespace, self.name)
        }
    }
}

/// Writes mirror objects through one client.
pub struct Writer {
    client: kube::Client,
    resources: Mutex<HashMap<MirrorKind, ApiResource>>,
}

impl Writer {
    /// A writer over `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            resources: Mutex::new(HashMap::new()),
        }
    }

    /// The served resource of `kind`, found by discovery once (a failure is not cached).
    async fn resource(&self, target: &Target) -> Result<ApiResource, MirrorError> {
        if let Some(found) = self.resources.lock().get(&target.kind) {
            return Ok(found.clone());
        }
        let kind = target.kind;
        let (group, version) = (kind.group(), kind.api_version().rsplit('/').next());
        let gvk = GroupVersionKind::gvk(group, version.unwrap_or_default(), kind.kind());
        let (resource, _) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|source| MirrorError::KindNotServed {
                object: target.describe(),
                source,
            })?;
        self.resources.lock().insert(kind, resource.clone());
        Ok(resource)
    }

    fn api(&self, resource: &ApiResource, target: &Target) -> Api<DynamicObject> {
        if target.namespace.is_empty() {
            Api::all_with(self.client.clone(), resource)
        } else {
            Api::namespaced_with(self.client.clone(), &target.namespace, resource)
        }
    }

    /// Brings `target` to `wanted`: reads it, then applies the labels and rewrites the taint
    /// list only where they differ. Conflicts restart the read (a few times, with jittered
    /// backoff). Returns the number of writes made (0 when it was up to date).
    pub async fn sync(
        &self,
        target: &Target,
        wanted: &Wanted,
        now: &str,
    ) -> Result<u32, MirrorError> {
        let resource = self.resource(target).await?;
        let api = self.api(&resource, target);
        let attempt = || self.sync_once(&api, &resource, target, wanted, now);
        attempt
            .retry(
                ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(50))
                    .with_max_delay(Duration::from_secs(2))
                    .with_max_times(5)
                    .with_jitter(),
            )
            .when(|e| matches!(e, MirrorError::Conflict { .. }))
            .await
    }

    async fn sync_once(
        &self,
        api: &Api<DynamicObject>,
        resource: &ApiResource,
        target: &Target,
        wanted: &Wanted,
        now: &str,
    ) -> Result<u32, MirrorError> {
        let object = target.describe();
        let current = api
            .get_opt(&target.name)
            .await
            .map_err(|e| MirrorError::from_api(&object, "get", e))?
            .ok_or_else(|| MirrorError::NotFound {
                object: object.clone(),
            })?;
        let current = serde_json::to_value(&current).unwrap_or(Value::Null);
        let mut seen = Observed::from_object(&current, FIELD_MANAGER);
        let mut writes = 0;
        if labels_need_apply(wanted, &seen) {
            let mut metadata = json!({
                "name": target.name,
                "resourceVersion": seen.resource_version,
                "labels": wanted.labels,
            });
            if !target.namespace.is_empty() {
                metadata["namespace"] = target.namespace.clone().into();
            }
            let body = json!({
                "apiVersion": resource.api_version,
                "kind": resource.kind,
                "metadata": metadata,
            });
            let params = PatchParams::apply(FIELD_MANAGER).force();
            let applied = api
                .patch(&target.name, &params, &Patch::Apply(body))
                .await
                .map_err(|e| MirrorError::from_api(&object, "patch", e))?;
            writes += 1;
            seen.resource_version = applied.metadata.resource_version.unwrap_or_default();
        }
        if let Some(taints) = taints_after(target.kind, wanted.taint, &seen.taints, now) {
            let patch = json!({
                "metadata": {"resourceVersion": seen.resource_version},
                "spec": {"taints": taints},
            });
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            };
            api.patch(&target.name, &params, &Patch::Merge(patch))
                .await
                .map_err(|e| MirrorError::from_api(&object, "patch", e))?;
            writes += 1;
        }
        Ok(writes)
    }
}

//! Which outcome the simulated kubelet gives each pod: test-set rules (newest first) and the
//! outcome fixed per pod uid once it is first seen.

use crate::store::ns_name;
use serde_json::Value;
use std::collections::HashMap;

/// What the simulated kubelet does with a matching pod.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Outcome {
    /// Run, then exit 0 (phase `Succeeded`).
    #[default]
    Succeed,
    /// Run, then exit with `exit_code` (phase `Failed`); `log` becomes the container log.
    Fail {
        /// Container exit code.
        exit_code: i32,
        /// Text served by `pods/{name}/log`.
        log: String,
    },
    /// Never scheduled: `PodScheduled=False`, reason `Unschedulable`, with this message.
    NeverSchedule {
        /// The scheduler message.
        message: String,
    },
    /// Scheduled, but the image never pulls (`ErrImagePull`, then `ImagePullBackOff`).
    ImagePullError,
    /// Run and stay `Running` and Ready.
    RunForever,
}

/// Selects the pods an [`Outcome`] applies to; every set criterion must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodMatcher {
    name_prefix: Option<String>,
    namespace: Option<String>,
    labels: Vec<(String, String)>,
}

impl PodMatcher {
    /// Matches every pod.
    pub fn any() -> Self {
        Self::default()
    }

    /// Matches pods whose name starts with `prefix` (a full name matches itself).
    pub fn name_prefix(prefix: impl Into<String>) -> Self {
        Self {
            name_prefix: Some(prefix.into()),
            ..Self::default()
        }
    }

    /// Also requires the pod to be in `namespace`.
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Also requires label `key=value`.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }

    /// Whether a pod object matches.
    pub fn matches(&self, pod: &Value) -> bool {
        let (ns, name) = ns_name(pod);
        self.name_prefix
            .as_ref()
            .is_none_or(|p| name.starts_with(p.as_str()))
            && self.namespace.as_ref().is_none_or(|n| *n == ns)
            && self
                .labels
                .iter()
                .all(|(k, v)| pod["metadata"]["labels"][k].as_str() == Some(v.as_str()))
    }
}

/// Outcome rules (newest first wins) and the outcome fixed for each pod uid.
#[derive(Debug, Default)]
pub struct Rules {
    rules: Vec<(PodMatcher, Outcome)>,
    decided: HashMap<String, Outcome>,
}

impl Rules {
    /// Adds a rule; it takes precedence over earlier ones for pods not yet decided.
    pub fn push(&mut self, matcher: PodMatcher, outcome: Outcome) {
        self.rules.insert(0, (matcher, outcome));
    }

    pub(super) fn outcome_for(&mut self, pod: &Value) -> Outcome {
        let uid = pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let rules = &self.rules;
        self.decided
            .entry(uid)
            .or_insert_with(|| {
                rules
                    .iter()
                    .find(|(m, _)| m.matches(pod))
                    .map(|(_, o)| o.clone())
                    .unwrap_or_default()
            })
            .clone()
    }
}

//! [`FakePodApi`]: an in-memory [`PodApi`] for the runner's tests. Each created pod follows
//! a [`Script`] on tokio's (paused) clock; every call is recorded.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::json;
use tokio::time::Instant;

use super::api::{PodApi, PodApiError};

/// How a created pod behaves.
#[derive(Clone, Debug)]
pub enum Script {
    /// Running, then Succeeded `after` its creation.
    Succeed { after: Duration },
    /// Running, then Failed `after` its creation: container `check` exits with `exit_code`.
    Fail {
        after: Duration,
        exit_code: i32,
        log: String,
    },
    /// Stays in this status (unschedulable, image pull errors).
    Stuck(Box<PodStatus>),
    /// Runs forever.
    Hang { log: String },
    /// Cycles through these statuses, one per `every`.
    Cycle {
        statuses: Vec<PodStatus>,
        every: Duration,
    },
}

impl Script {
    fn log(&self) -> &str {
        match self {
            Self::Fail { log, .. } | Self::Hang { log } => log,
            _ => "",
        }
    }

    fn status(&self, age: Duration) -> PodStatus {
        let container = |state: serde_json::Value| {
            json!({ "name": "check", "image": "busybox", "imageID": "", "ready": false,
                    "restartCount": 0, "state": state })
        };
        let value = match self {
            Self::Succeed { after } if age >= *after => json!({ "phase": "Succeeded",
                "containerStatuses": [container(json!({ "terminated": { "exitCode": 0 } }))] }),
            Self::Fail {
                after, exit_code, ..
            } if age >= *after => json!({ "phase": "Failed",
                "containerStatuses": [container(json!({ "terminated": {
                    "exitCode": exit_code, "reason": "Error" } }))] }),
            Self::Stuck(status) => return (**status).clone(),
            Self::Cycle { statuses, every } => {
                let step = age.as_nanos() / every.as_nanos().max(1);
                let index = usize::try_from(step).unwrap_or(0) % statuses.len();
                return statuses[index].clone();
            }
            _ => json!({ "phase": "Running",
                "containerStatuses": [container(json!({ "running": {} }))] }),
        };
        serde_json::from_value(value).unwrap()
    }
}

/// A pod in the fake API.
pub struct FakePod {
    pub pod: Pod,
    pub script: Script,
    pub created: Instant,
}

/// Everything the fake holds and saw.
#[derive(Default)]
pub struct FakeState {
    /// Pods that exist, by name.
    pub pods: BTreeMap<String, FakePod>,
    /// Scripts for the next created pods; `Succeed` after 3 s when empty.
    pub scripts: VecDeque<Script>,
    /// Every created pod (named) and when.
    pub created: Vec<(Pod, Instant)>,
    /// Every deleted pod name, in order.
    pub deleted: Vec<String>,
    /// `(pod, container, tail_lines)` of every log read.
    pub log_reads: Vec<(String, String, u32)>,
    /// When set, `create` is refused as forbidden.
    pub forbid_create: bool,
    next_id: u32,
}

/// An in-memory pod API; clones share their state.
#[derive(Clone, Default)]
pub struct FakePodApi(Arc<Mutex<FakeState>>);

impl FakePodApi {
    /// A fake whose created pods follow `scripts`, in order.
    pub fn with_scripts(scripts: impl IntoIterator<Item = Script>) -> Self {
        let fake = Self::default();
        fake.state().scripts.extend(scripts);
        fake
    }

    /// The shared state.
    pub fn state(&self) -> MutexGuard<'_, FakeState> {
        self.0.lock().unwrap()
    }

    /// Adds an existing pod (a leftover) with these labels.
    pub fn seed(&self, namespace: &str, name: &str, labels: serde_json::Value) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": namespace, "labels": labels }
        }))
        .unwrap();
        let script = Script::Hang { log: String::new() };
        let created = Instant::now();
        let fake = FakePod {
            pod,
            script,
            created,
        };
        self.state().pods.insert(name.to_owned(), fake);
    }
}

fn matches(pod: &Pod, namespace: &str, selector: &str) -> bool {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    pod.metadata.namespace.as_deref() == Some(namespace)
        && selector.split(',').all(|term| {
            let (key, value) = term.split_once('=').unwrap();
            labels.get(key).map(String::as_str) == Some(value)
        })
}

impl PodApi for FakePodApi {
    async fn create(&self, namespace: &str, pod: &Pod) -> Result<Pod, PodApiError> {
        let mut state = self.state();
        if state.forbid_create {
            return Err(PodApiError::Forbidden {
                verb: "create",
                resource: "pods",
                namespace: namespace.to_owned(),
                name: None,
                source: "pods is forbidden: User cannot create resource".into(),
            });
        }
        state.next_id += 1;
        let mut pod = pod.clone();
        let prefix = pod.metadata.generate_name.clone().unwrap_or_default();
        let name = format!("{prefix}{}", state.next_id);
        pod.metadata.name = Some(name.clone());
        pod.metadata.namespace = Some(namespace.to_owned());
        let script = state.scripts.pop_front().unwrap_or(Script::Succeed {
            after: Duration::from_secs(3),
        });
        let created = Instant::now();
        state.created.push((pod.clone(), created));
        let stored = FakePod {
            pod: pod.clone(),
            script,
            created,
        };
        state.pods.insert(name, stored);
        Ok(pod)
    }

    async fn get(&self, _namespace: &str, name: &str) -> Result<Option<Pod>, PodApiError> {
        let state = self.state();
        Ok(state.pods.get(name).map(|fake| {
            let mut pod = fake.pod.clone();
            pod.status = Some(fake.script.status(fake.created.elapsed()));
            pod
        }))
    }

    async fn log_tail(
        &self,
        _namespace: &str,
        name: &str,
        container: &str,
        tail_lines: u32,
    ) -> Result<String, PodApiError> {
        let mut state = self.state();
        state
            .log_reads
            .push((name.to_owned(), container.to_owned(), tail_lines));
        let log = state.pods.get(name).map(|p| p.script.log().to_owned());
        let log = log.unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(tail_lines as usize)..];
        Ok(tail.iter().map(|l| format!("{l}\n")).collect())
    }

    async fn delete(&self, _namespace: &str, name: &str) -> Result<(), PodApiError> {
        let mut state = self.state();
        state.pods.remove(name);
        state.deleted.push(name.to_owned());
        Ok(())
    }

    async fn list(&self, namespace: &str, label_selector: &str) -> Result<Vec<Pod>, PodApiError> {
        let state = self.state();
        Ok(state
            .pods
            .values()
            .filter(|fake| matches(&fake.pod, namespace, label_selector))
            .map(|fake| fake.pod.clone())
            .collect())
    }
}

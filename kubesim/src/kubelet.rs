//! The simulated kubelet and scheduler: Ready nodes, and pods moved Pending → Running →
//! Succeeded/Failed (or stuck unschedulable / in image-pull back-off) by rules tests set.

mod node;
mod rules;

pub use node::{node_object, set_node_ready};
pub use rules::{Outcome, PodMatcher, Rules};

use crate::{
    ops::timestamp,
    server::Shared,
    store::{EventType, ns_name},
};
use node::{core, is_ready};
use serde_json::{Value, json};

fn cond(kind: &str, ok: bool, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": if ok { "True" } else { "False" }, "reason": reason,
           "message": message, "lastTransitionTime": timestamp()})
}

fn containers(pod: &Value, state: &Value, ready: bool) -> Value {
    let list = pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Value::Array(
        list.iter()
            .map(|c| {
                json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": ready,
                            "restartCount": 0, "started": ready, "state": state})
            })
            .collect(),
    )
}

/// One scheduling/kubelet step for one pod; returns the new pod when it changed.
fn step(
    pod: &Value,
    outcome: &Outcome,
    ready_nodes: &[String],
    log: &mut Option<String>,
) -> Option<Value> {
    let mut p = pod.clone();
    let phase = p["status"]["phase"]
        .as_str()
        .unwrap_or("Pending")
        .to_owned();
    let scheduled = p["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "PodScheduled" && c["status"] == "True");
    match (phase.as_str(), scheduled, outcome) {
        ("Pending", false, Outcome::NeverSchedule { message }) => {
            let c = cond("PodScheduled", false, "Unschedulable", message);
            (p["status"]["conditions"] != json!([c.clone()])).then(|| {
                p["status"]["conditions"] = json!([c]);
                p
            })
        }
        ("Pending", false, _) if ready_nodes.is_empty() => {
            if !p["status"]["conditions"].is_null() {
                return None;
            }
            let msg = "0/0 nodes are available: no Ready node";
            p["status"]["conditions"] = json!([cond("PodScheduled", false, "Unschedulable", msg)]);
            Some(p)
        }
        ("Pending", false, _) => {
            let uid = p["metadata"]["uid"].as_str().unwrap_or_default();
            let idx = uid.bytes().map(usize::from).sum::<usize>() % ready_nodes.len();
            if p["spec"]["nodeName"].as_str().is_none_or(str::is_empty) {
                p["spec"]["nodeName"] = ready_nodes[idx].clone().into();
            }
            p["status"]["conditions"] = json!([cond("PodScheduled", true, "", "")]);
            p["status"]["hostIP"] = "10.0.0.1".into();
            p["status"]["startTime"] = timestamp().into();
            let waiting = json!({"waiting": {"reason": "ContainerCreating"}});
            p["status"]["containerStatuses"] = containers(&p, &waiting, false);
            Some(p)
        }
        ("Pending", true, Outcome::ImagePullError) => {
            let reason = if p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                == "ErrImagePull"
            {
                "ImagePullBackOff"
            } else if p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                == "ImagePullBackOff"
            {
                return None;
            } else {
                "ErrImagePull"
            };
            let image = p["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let message = format!("failed to pull image \"{image}\": not found (simulated)");
            let waiting = json!({"waiting": {"reason": reason, "message": message}});
            p["status"]["containerStatuses"] = containers(&p, &waiting, false);
            Some(p)
        }
        ("Pending", true, _) => {
            p["status"]["phase"] = "Running".into();
            p["status"]["podIP"] = "10.244.0.10".into();
            let running = json!({"running": {"startedAt": timestamp()}});
            p["status"]["containerStatuses"] = containers(&p, &running, true);
            p["status"]["conditions"] = json!([
                cond("PodScheduled", true, "", ""),
                cond("Initialized", true, "", ""),
                cond("ContainersReady", true, "", ""),
                cond("Ready", true, "", ""),
            ]);
            Some(p)
        }
        ("Running", _, Outcome::Succeed | Outcome::Fail { .. }) => {
            let (phase, code, reason) = match outcome {
                Outcome::Fail {
                    exit_code,
                    log: text,
                } => {
                    *log = Some(text.clone());
                    ("Failed", *exit_code, "Error")
                }
                _ => ("Succeeded", 0, "Completed"),
            };
            p["status"]["phase"] = phase.into();
            let now = timestamp();
            let term = json!({"terminated": {"exitCode": code, "reason": reason, "startedAt": now, "finishedAt": now}});
            p["status"]["containerStatuses"] = containers(&p, &term, false);
            p["status"]["conditions"] = json!([
                cond("PodScheduled", true, "", ""),
                cond("Initialized", true, "", ""),
                cond("ContainersReady", false, "PodCompleted", ""),
                cond("Ready", false, "PodCompleted", ""),
            ]);
            Some(p)
        }
        _ => None,
    }
}

/// Advances every pod by at most one step.
pub fn tick(shared: &Shared) {
    let mut store = shared.store.lock();
    let mut rules = shared.kubelet.lock();
    let nodes = core(&store, "nodes");
    let pods = core(&store, "pods");
    let ready_nodes: Vec<String> = store
        .list(&nodes, None)
        .iter()
        .filter(|n| is_ready(n))
        .map(|n| ns_name(n).1)
        .collect();
    for pod in store.list(&pods, None) {
        let shaped = |v: &Value| v.is_object() || v.is_null();
        if !pod["metadata"]["deletionTimestamp"].is_null()
            || !shaped(&pod["status"])
            || !shaped(&pod["spec"])
        {
            continue;
        }
        let outcome = rules.outcome_for(&pod);
        let mut log = None;
        if let Some(next) = step(&pod, &outcome, &ready_nodes, &mut log) {
            let key = ns_name(&next);
            store.put(&pods, next, EventType::Modified);
            if let Some(text) = log {
                store.pod_logs.insert(key, text);
            }
        }
    }
}

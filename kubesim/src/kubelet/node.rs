//! Simulated nodes: the object created at start and the Ready condition tests flip.

use crate::{
    ops::timestamp,
    resources::ResourceDef,
    store::{EventType, Store},
};
use serde_json::{Value, json};

/// A Ready node object named `name`.
pub fn node_object(name: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
        "spec": {},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [ready_condition(true)],
            "nodeInfo": {
                "architecture": "amd64", "bootID": name, "containerRuntimeVersion": "kubesim://1",
                "kernelVersion": "6.0.0", "kubeProxyVersion": "v1.34.0", "kubeletVersion": "v1.34.0",
                "machineID": name, "operatingSystem": "linux", "osImage": "kubesim", "systemUUID": name,
            },
        },
    })
}

fn ready_condition(ready: bool) -> Value {
    let now = timestamp();
    json!({
        "type": "Ready",
        "status": if ready { "True" } else { "False" },
        "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
        "message": if ready { "kubelet is posting ready status" } else { "kubelet stopped posting node status" },
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    })
}

/// Sets a node's Ready condition; returns false when the node does not exist.
pub fn set_node_ready(store: &mut Store, name: &str, ready: bool) -> bool {
    let def = core(store, "nodes");
    let Some(mut node) = store.get(&def, "", name).cloned() else {
        return false;
    };
    node["status"]["conditions"] = json!([ready_condition(ready)]);
    store.put(&def, node, EventType::Modified);
    true
}

pub(super) fn core(store: &Store, plural: &str) -> ResourceDef {
    store
        .registry
        .find("", "v1", plural)
        .cloned()
        .unwrap_or_else(|| unreachable!("{plural} is built in"))
}

pub(super) fn is_ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

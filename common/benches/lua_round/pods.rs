//! The benchmark's objects: 2,000 realistic Pods (two containers, five conditions, no
//! managedFields), and the check every line of the benchmark runs over them.

use serde_json::{Value, json};

/// Counts Ready pods (the shape of a typical `readyPods`-style Lua check).
pub const READY_PODS: &str = r#"function evaluate()
  local ready = 0
  for _, pod in ipairs(resources) do
    if pod.status and pod.status.conditions then
      for _, c in ipairs(pod.status.conditions) do
        if c.type == "Ready" and c.status == "True" then ready = ready + 1 end
      end
    end
  end
  return { pass = ready * 100 >= #resources * 90, message = ready .. "/" .. #resources .. " pods ready" }
end"#;

/// Pod number `i`: one in 17 is not Ready.
pub fn pod(i: usize) -> Value {
    let ready = if i.is_multiple_of(17) {
        "False"
    } else {
        "True"
    };
    let container = |name: &str, image: &str| {
        json!({
            "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
            "ports": [{ "containerPort": 8080, "name": "http", "protocol": "TCP" }],
            "env": [{ "name": "LOG_LEVEL", "value": "info" }, { "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } }],
            "resources": { "requests": { "cpu": "100m", "memory": "128Mi" }, "limits": { "memory": "256Mi" } },
            "volumeMounts": [{ "name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true }],
            "readinessProbe": { "httpGet": { "path": "/readyz", "port": 8080 }, "periodSeconds": 10 }
        })
    };
    let status = |name: &str| {
        json!({ "name": name, "ready": ready == "True", "restartCount": i % 3, "image": "registry.example/app:1.2.3",
                "imageID": "registry.example/app@sha256:0123456789abcdef", "containerID": format!("containerd://{i:064x}"),
                "started": true, "state": { "running": { "startedAt": "2024-05-01T10:00:00Z" } } })
    };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("web-{i:05}-7d9f8b6c4d-x2k9q"), "namespace": format!("team-{}", i % 20),
            "uid": format!("{i:08x}-1111-2222-3333-444455556666"), "resourceVersion": format!("{}", 100000 + i),
            "creationTimestamp": "2024-05-01T09:59:00Z",
            "labels": { "app": "web", "pod-template-hash": "7d9f8b6c4d", "tier": "frontend", "version": "1.2.3" },
            "annotations": { "prometheus.io/scrape": "true", "kubectl.kubernetes.io/restartedAt": "2024-05-01T09:58:00Z" },
            "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c4d", "uid": "abc", "controller": true, "blockOwnerDeletion": true }]
        },
        "spec": {
            "containers": [container("app", "registry.example/app:1.2.3"), container("sidecar", "registry.example/proxy:2.0")],
            "nodeName": format!("node-{}", i % 50), "restartPolicy": "Always", "serviceAccountName": "web",
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
            "tolerations": [{ "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 }],
            "volumes": [{ "name": "kube-api-access", "projected": { "defaultMode": 420, "sources": [{ "serviceAccountToken": { "expirationSeconds": 3607, "path": "token" } }] } }]
        },
        "status": {
            "phase": "Running", "podIP": format!("10.0.{}.{}", i / 250, i % 250), "hostIP": "192.0.2.10",
            "qosClass": "Burstable", "startTime": "2024-05-01T09:59:01Z",
            "conditions": [
                { "type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": "2024-05-01T09:59:03Z" },
                { "type": "Initialized", "status": "True", "lastTransitionTime": "2024-05-01T09:59:01Z" },
                { "type": "Ready", "status": ready, "lastTransitionTime": "2024-05-01T10:00:05Z" },
                { "type": "ContainersReady", "status": ready, "lastTransitionTime": "2024-05-01T10:00:05Z" },
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-05-01T09:59:00Z" }
            ],
            "containerStatuses": [status("app"), status("sidecar")]
        }
    })
}

/// Scalars, arrays and objects in a JSON value (what conversion creates in Lua).
pub fn count_values(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(count_values).sum::<usize>(),
        Value::Object(map) => 1 + map.values().map(count_values).sum::<usize>(),
        _ => 1,
    }
}

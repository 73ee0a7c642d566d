//! Benchmark of a Lua evaluation round over 2,000 Pod-like objects: taking the objects in
//! (as compact JSON text, as the agent's reader hands them),
//! one check, and a full round of 10 checks plus conversion, with lazy conversion (what
//! rounds do) beside eager conversion of every object (the baseline), measured in the same
//! run. Prints median and min in milliseconds, and the Lua memory each round holds.
//!
//! The lazy full round is measured twice: on a fresh state (`cold`: every object new to
//! it, as after the objects all changed) and as the next round on the state of an earlier
//! one over the same object versions (`warm`: what the agent's rounds do while the watched
//! objects do not change; each object is taken in as the same text, a clone of the
//! `CompactObject` the cache holds, and keeps what the earlier round converted).
//!
//! Also prints the engine's floor: the same check over plain Lua tables converted
//! beforehand, in a bare Lua 5.4 state with the same deadline hook (no sandbox, no
//! copy-on-write, nothing a round could skip), so the round's figures read against what
//! Lua itself costs.
//!
//! Run with `cargo bench -p fleetpulse-common --bench lua_round`.

use std::time::{Duration, Instant};

use fleetpulse_common::compact::CompactObject;
use fleetpulse_common::lua::{Conversion, LuaLimits, LuaRound, ObjectId};
use mlua::{HookTriggers, Lua, LuaSerdeExt, VmState};
use serde_json::{Value, json};

const OBJECTS: usize = 2000;
const CHECKS: usize = 10;
const REPEATS: usize = 7;

/// Counts Ready pods (the shape of a typical `readyPods`-style Lua check).
const READY_PODS: &str = r#"function evaluate()
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

fn pod(i: usize) -> Value {
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

/// Takes the objects in as the agent's reader hands them: compact JSON text.
fn convert(round: &mut LuaRound, pods: Vec<CompactObject>) -> Vec<ObjectId> {
    pods.into_iter()
        .map(|p| round.add_compact(p).expect("pod converts"))
        .collect()
}

fn check(round: &LuaRound, ids: &[ObjectId], i: usize) {
    let outcome = round
        .evaluate(&format!("ready-pods-{i}"), READY_PODS, ids, &[])
        .expect("check runs");
    assert!(outcome.passing, "{}", outcome.message);
}

/// Scalars, arrays and objects in a JSON value (what conversion creates in Lua).
fn count_values(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(count_values).sum::<usize>(),
        Value::Object(map) => 1 + map.values().map(count_values).sum::<usize>(),
        _ => 1,
    }
}

/// Runs `f` REPEATS times; returns (median, min) in ms.
fn measure(mut f: impl FnMut() -> Duration) -> (f64, f64) {
    median_min((0..REPEATS).map(|_| f().as_secs_f64() * 1000.0).collect())
}

/// (median, min) of `runs`.
fn median_min(mut runs: Vec<f64>) -> (f64, f64) {
    runs.sort_by(f64::total_cmp);
    (runs[runs.len() / 2], runs[0])
}

/// One conversion mode's figures: (median, min) ms for taking the objects in, one check,
/// and a full round; and the Lua memory a full round holds, in KiB.
struct Figures {
    convert: (f64, f64),
    one_check: (f64, f64),
    round: (f64, f64),
    lua_kib: usize,
}

fn figures(pods: &[CompactObject], conversion: Conversion) -> Figures {
    // A deadline far away: on a loaded machine a slow run is a figure, not a failure.
    let limits = LuaLimits {
        deadline: Duration::from_secs(30),
        ..LuaLimits::default()
    };
    let new_round = || LuaRound::with_conversion(limits, conversion).expect("round");
    let convert_ms = measure(|| {
        let mut round = new_round();
        let copies = pods.to_vec();
        let started = Instant::now();
        convert(&mut round, copies);
        started.elapsed()
    });
    let mut round = new_round();
    let ids = convert(&mut round, pods.to_vec());
    check(&round, &ids, 0);
    let one_check_ms = measure(|| {
        let started = Instant::now();
        check(&round, &ids, 0);
        started.elapsed()
    });
    let mut lua_kib = 0;
    let round_ms = measure(|| {
        let copies = pods.to_vec();
        let started = Instant::now();
        let mut round = new_round();
        let ids = convert(&mut round, copies);
        for i in 0..CHECKS {
            check(&round, &ids, i);
        }
        let took = started.elapsed();
        lua_kib = round.lua_memory() / 1024;
        took
    });
    Figures {
        convert: convert_ms,
        one_check: one_check_ms,
        round: round_ms,
        lua_kib,
    }
}

/// The warm lazy round and the floor of ten checks, measured alternately (a warm round,
/// then ten floor checks, REPEATS times), so both see the machine as it is at the same
/// moments: (median, min) ms of each, and the median of the per-repetition ratios.
struct WarmAgainstFloor {
    warm_round: (f64, f64),
    floor_round: (f64, f64),
    ratio: f64,
}

fn warm_against_floor(pods: &[CompactObject], floor: &Floor) -> WarmAgainstFloor {
    let limits = LuaLimits {
        deadline: Duration::from_secs(30),
        ..LuaLimits::default()
    };
    let mut state = LuaRound::new(limits).expect("round");
    full_round(&mut state, limits, pods);
    let (mut warm, mut bare, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..REPEATS {
        let started = Instant::now();
        full_round(&mut state, limits, pods);
        let w = started.elapsed().as_secs_f64() * 1000.0;
        let f: f64 = (0..CHECKS).map(|_| floor.check_ms()).sum();
        warm.push(w);
        bare.push(f);
        ratios.push(w / f);
    }
    WarmAgainstFloor {
        warm_round: median_min(warm),
        floor_round: median_min(bare),
        ratio: median_min(ratios).0,
    }
}

/// A full round as the agent runs it on a kept state: the next round begins, the objects
/// are taken in (clones: the same text), the versions not taken in are let go of, and
/// every check runs.
fn full_round(state: &mut LuaRound, limits: LuaLimits, pods: &[CompactObject]) {
    state.begin(limits);
    let ids = convert(state, pods.to_vec());
    state.release_untaken().expect("release");
    for i in 0..CHECKS {
        check(state, &ids, i);
    }
}

/// The check over plain tables in a bare state with a hook every 1,000 instructions (as
/// the sandbox's deadline hook).
struct Floor {
    // Holds the state `evaluate` runs in.
    _lua: Lua,
    evaluate: mlua::Function,
}

impl Floor {
    fn new(pods: &[Value]) -> Floor {
        let lua = Lua::new();
        lua.set_global_hook(HookTriggers::new().every_nth_instruction(1000), |_, _| {
            Ok(VmState::Continue)
        })
        .expect("hook");
        let resources = lua
            .create_sequence_from(pods.iter().map(|p| lua.to_value(p).expect("pod converts")))
            .expect("resources");
        lua.globals().set("resources", resources).expect("global");
        lua.load(READY_PODS).exec().expect("script loads");
        let evaluate = lua.globals().get("evaluate").expect("evaluate");
        Floor {
            _lua: lua,
            evaluate,
        }
    }

    /// One check, in ms.
    fn check_ms(&self) -> f64 {
        let started = Instant::now();
        let _: mlua::Table = self.evaluate.call(()).expect("check runs");
        started.elapsed().as_secs_f64() * 1000.0
    }
}

fn main() {
    let pods: Vec<Value> = (0..OBJECTS).map(pod).collect();
    let bytes: usize = pods.iter().map(|p| p.to_string().len()).sum();
    let values: usize = pods.iter().map(count_values).sum();
    let compact: Vec<CompactObject> = pods.iter().map(CompactObject::from).collect();
    let lazy = figures(&compact, Conversion::Lazy);
    let eager = figures(&compact, Conversion::Eager);
    let bare = Floor::new(&pods);
    let floor = median_min((0..REPEATS).map(|_| bare.check_ms()).collect());
    let warm = warm_against_floor(&compact, &bare);
    println!(
        "lua_round objects={OBJECTS} json_kib={} json_values={values} repeats={REPEATS} engine=lua54",
        bytes / 1024
    );
    for (name, f) in [("lazy", &lazy), ("eager", &eager)] {
        println!(
            "  {name:<5} convert_ms={:.2} (min {:.2}) one_check_ms={:.2} (min {:.2}) \
             round_{CHECKS}_checks_ms={:.2} (min {:.2}) lua_kib={}",
            f.convert.0, f.convert.1, f.one_check.0, f.one_check.1, f.round.0, f.round.1, f.lua_kib
        );
    }
    println!(
        "  floor one_check_ms={:.2} (min {:.2}): plain tables, bare state, same hook; \
         {CHECKS} checks at least {:.2} ms",
        floor.0,
        floor.1,
        floor.0 * CHECKS as f64
    );
    println!(
        "  warm  round_{CHECKS}_checks_ms={:.2} (min {:.2}): the next round on a kept state, \
         every object unchanged; floor of {CHECKS} checks at the same moments {:.2} (min {:.2})",
        warm.warm_round.0, warm.warm_round.1, warm.floor_round.0, warm.floor_round.1
    );
    println!(
        "  lazy/eager full round: {:.2}x; lazy one check / floor: {:.2}x; \
         full lazy round / floor: warm {:.2}x (median of alternate runs), cold {:.2}x",
        lazy.round.0 / eager.round.0,
        lazy.one_check.0 / floor.0,
        warm.ratio,
        lazy.round.0 / (floor.0 * CHECKS as f64)
    );
}

#!/usr/bin/env python3
"""Agent footprint (issue 7): RSS and CPU of the real `fleetpulse-agent` idle, and during
check rounds over N objects, against a `kubesim` member cluster and an embedded hub.

    cargo build --release -p fleetpulse-agent -p fleetpulse-hub -p fleetpulse-kubesim
    python3 scripts/agent-footprint.py [--objects 2000] [--target target/release]

The agent runs a Lua liveness check over every ConfigMap of the member cluster each
heartbeat interval (10 s), plus its built-ins. Phase 1 has no ConfigMaps (idle: built-ins
and heartbeats only); phase 2 adds N ConfigMaps, so each round lists, converts and
evaluates N objects. RSS is read from /proc/<pid>/status (VmRSS; VmHWM is the peak), CPU
from /proc/<pid>/stat (utime + stime). Prints one summary line last.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")
INTERVAL = 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    sys.exit(f"timed out waiting for {what}")


def proc_status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0  # kB -> MiB
    raise KeyError(field)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def heartbeats(hub):
    """The hub's count of accepted heartbeats, from its Prometheus metrics."""
    with urllib.request.urlopen(f"{hub}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('fleetpulse_hub_heartbeats_total{result="accepted"}'):
                return int(float(line.rsplit(" ", 1)[1]))
    return 0


def post(api, path, body):
    req = urllib.request.Request(
        f"{api}{path}", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()


MEMBER_CLUSTER = """apiVersion: fleetpulse.io/v1alpha1
kind: MemberCluster
metadata:
  name: edge-1
  namespace: fleet
spec:
  heartbeat:
    intervalSeconds: {interval}
    gracePeriodSeconds: 40
  agent:
    publicKeys:
      - publicKey: {public_key}
  livenessChecks:
  - name: config-maps
    resourceSelectors:
    - version: v1
      kind: ConfigMap
    condition: |
      function evaluate()
        local n = 0
        for _, cm in ipairs(resources) do
          if cm.data ~= nil and cm.data.ok == "true" then n = n + 1 end
        end
        return {{healthy = n == #resources, message = n .. " of " .. #resources .. " ok"}}
      end
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=2000)
    ap.add_argument("--target", default="target/release")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    binary = lambda name: os.path.join(args.target, name)
    work = tempfile.mkdtemp(prefix="agent-footprint-")
    procs = []
    try:
        kubeconfig = os.path.join(work, "member.kubeconfig")
        procs.append(subprocess.Popen(
            [binary("kubesim"), "--kubeconfig-out", kubeconfig, "--nodes", "3"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for("kubesim", lambda: os.path.exists(kubeconfig) and os.path.getsize(kubeconfig) > 0)
        with open(kubeconfig) as f:
            api = next(l.split("server:")[1].strip() for l in f if "server:" in l)

        key = os.path.join(work, "agent.pem")
        out = subprocess.run([binary("fleetpulse-agent"), "keygen", "--out", key],
                             check=True, capture_output=True, text=True).stdout
        public_key = next(l.split()[-1] for l in out.splitlines() if l.startswith("public key"))
        manifests = os.path.join(work, "manifests")
        os.makedirs(manifests)
        with open(os.path.join(manifests, "edge-1.yaml"), "w") as f:
            f.write(MEMBER_CLUSTER.format(interval=INTERVAL, public_key=public_key))
        port = free_port()
        hub = f"http://127.0.0.1:{port}"
        procs.append(subprocess.Popen(
            [binary("fleetpulse-hub"), "serve", "--manifests", manifests,
             "--data", os.path.join(work, "data"), "--listen", f"127.0.0.1:{port}",
             "--insecure-http"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for("the hub", lambda: _ok(f"{hub}/readyz"))

        agent = subprocess.Popen(
            [binary("fleetpulse-agent"), "run", "--hub", hub, "--insecure-http",
             "--cluster", "fleet/edge-1", "--key-file", key, "--kubeconfig", kubeconfig,
             "--interval-seconds", str(INTERVAL)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(agent)
        pid = agent.pid

        def rounds(n):
            """Waits for n more accepted heartbeats (one check round each)."""
            start = heartbeats(hub)
            wait_for(f"{n} heartbeats", lambda: heartbeats(hub) >= start + n,
                     timeout=INTERVAL * (n + 3))

        rounds(2)  # warmed up: config pulled, first rounds done
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        rounds(args.rounds)
        idle_cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0) * 100
        idle_rss = proc_status(pid, "VmRSS")
        print(f"idle: RSS {idle_rss:.1f} MiB, CPU {idle_cpu:.2f}% of a core")

        for i in range(args.objects):
            post(api, "/api/v1/namespaces/default/configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"cm-{i:05}", "namespace": "default",
                             "labels": {"app": "footprint", "index": str(i)}},
                "data": {"ok": "true", "payload": "x" * 200}})
        rounds(1)  # the first round over the objects
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        rounds(args.rounds)
        busy_cpu_s = (cpu_seconds(pid) - cpu0) / args.rounds
        with urllib.request.urlopen(f"{hub}/v1/memberclusters", timeout=5) as r:
            body = json.loads(r.read())
        items = body.get("items", body) if isinstance(body, dict) else body
        checks = items[0].get("status", {}).get("checks", [])
        message = next((c.get("message", "") for c in checks if c["name"] == "config-maps"), "")
        if not message.startswith(f"{args.objects} of {args.objects}"):
            sys.exit(f"the check did not see the {args.objects} objects: {message!r}")
        print(f"check: {message}")
        busy_rss = proc_status(pid, "VmRSS")
        peak_rss = proc_status(pid, "VmHWM")
        print(f"{args.objects} objects: RSS {busy_rss:.1f} MiB (peak {peak_rss:.1f} MiB), "
              f"CPU {busy_cpu_s * 1000:.0f} ms per {INTERVAL} s round")
        print(f"agent_idle_rss_mib={idle_rss:.1f} agent_idle_cpu_percent={idle_cpu:.2f} "
              f"objects={args.objects} agent_rss_mib={busy_rss:.1f} agent_peak_rss_mib={peak_rss:.1f} "
              f"agent_cpu_ms_per_round={busy_cpu_s * 1000:.0f}")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def _ok(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except Exception:
        return False


if __name__ == "__main__":
    main()

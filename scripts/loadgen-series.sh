#!/usr/bin/env bash
# Runs every loadgen measurement of docs/performance.md ("Hub ingest") in a row, about
# 35 minutes on 2 cores, and prints each run's summary lines. Needs a release build:
#   cargo build --release -p fleetpulse-hub -p fleetpulse-tests --bin loadgen
# and two CPUs (the pinned runs put the hub on CPU 1 and loadgen on CPU 0).
set -euo pipefail
cd "$(dirname "$0")/.."
loadgen=./target/release/loadgen
pinned=(--hub-cpus 1 --loadgen-cpus 0)
# The stack's alternating phases (floor, batched signature, another heartbeat phase) run
# in the bar's runs only; the others measure their own phase.
export LOADGEN_STACK_SITTINGS=0

run() {
    local name=$1
    shift
    echo "=== $name: $*"
    "$@" | grep -E '^(hub|timed|verify_only|stack|clusters)'
}

for i in 1 2 3; do
    run "10k x 1s pinned ($i)" env LOADGEN_STACK_SITTINGS=2 $loadgen --clusters 10000 --interval-seconds 1 --duration-seconds 60 "${pinned[@]}"
done
run "10k x 1s pinned, floor" $loadgen --clusters 10000 --interval-seconds 1 --duration-seconds 60 "${pinned[@]}" --floor
run "10k x 1s pinned, strict" env FLEETPULSE_BATCH_VERIFY=false $loadgen --clusters 10000 --interval-seconds 1 --duration-seconds 60 "${pinned[@]}"
for i in 1 2; do
    run "10k x 10s pinned ($i)" $loadgen --clusters 10000 --interval-seconds 10 --duration-seconds 60 "${pinned[@]}"
done
run "10k x 10s pinned, floor" $loadgen --clusters 10000 --interval-seconds 10 --duration-seconds 60 "${pinned[@]}" --floor
for i in 1 2; do
    run "10k x 1s shared ($i)" $loadgen --clusters 10000 --interval-seconds 1 --duration-seconds 60
done
run "10k x 10s shared" $loadgen --clusters 10000 --interval-seconds 10 --duration-seconds 60
run "1k x 1s new connection per heartbeat" $loadgen --clusters 1000 --interval-seconds 1 --duration-seconds 30 "${pinned[@]}" --transport new-connection
run "10k x 1s HTTP/1.1" $loadgen --clusters 10000 --interval-seconds 1 --duration-seconds 30 "${pinned[@]}" --transport http1 --connections 64
run "10k x 10s, one connection per agent" $loadgen --clusters 10000 --interval-seconds 10 --duration-seconds 60 "${pinned[@]}" --connections 10000
for n in 1000 10000 30000; do
    run "memory, $n clusters" $loadgen --clusters "$n" --interval-seconds 10 --duration-seconds 30 "${pinned[@]}"
done

#!/bin/bash
# From a fresh Debian 12 machine to a table that says where the time went: installs what is
# missing, builds, writes the example model repository, starts chronoserve, loads it with
# chronobench (closed loop, concurrency 1, windows of a few hundred requests until 3 agree), prints the
# breakdown, stops.
# Environment: PORT (default 8001; 0 is refused), MODEL (policy_net), BATCH (8), REQUESTS (300).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
port=${PORT:-8001}
model=${MODEL:-policy_net}
batch=${BATCH:-8}
requests=${REQUESTS:-300}
if [[ $port =~ ^0+$ ]]; then
  echo "PORT=0 is not supported here: chronobench must know the port; set PORT to a free port (default 8001)" >&2
  exit 2
fi
if ! [[ $port =~ ^[0-9]+$ ]] || ((10#$port > 65535)); then
  echo "PORT=$port is not a port number (1-65535)" >&2
  exit 2
fi
# Before a build that may take half an hour: a port already taken would only fail the server after it.
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  echo "port $port on 127.0.0.1 is in use; set PORT=... to another port" >&2
  exit 1
fi
# One demo at a time: two would share build/ and the server log.
mkdir -p build
exec 9>build/.demo.lock
flock -n 9 || { echo "another scripts/demo.sh is running in this checkout" >&2; exit 1; }

install_deps
build_chronoserve chronoserve chronoserve-examples chronobench
build/bin/chronoserve-examples --out build/demo-models

log=build/demo-server.log
rm -f "$log"  # a READY line from an earlier run must not pass for this server's
build/bin/chronoserve --model-repository build/demo-models --grpc-port "$port" --metrics-port 0 --warmup-runs 1 >"$log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
echo "chronoserve starting (pid $server, log $log): loading and warming the models..."
for _ in $(seq 1 600); do
  grep -qs "server READY\|server up" "$log" && break
  kill -0 $server 2>/dev/null || {
    cat "$log"
    echo "chronoserve exited while starting; if port $port is in use, set PORT=... to use another port" >&2
    exit 1
  }
  sleep 0.5
done
grep -q "server READY" "$log" || { echo "the server did not become ready:"; cat "$log"; exit 1; }
grep "READY on" "$log" | sed 's/^.*] /  /'

echo
echo "chronobench: $model, batch $batch, closed loop, concurrency 1, one-second windows of at least $requests requests until 3 agree (6 at most)"
build/bin/chronobench -m "$model" -u "127.0.0.1:$port" -b "$batch" --warmup-requests 50 \
  --measurement-request-count "$requests" -p 1000 -r 6 --json build/demo-report.json \
  --html build/demo-report.html
echo
echo "Columns are microseconds, p50/p99 per request: e2e = client end-to-end; transport = e2e - server_total"
echo "(network + serialisation); admit (message read, validated, inputs copied), queue, h2d, compute,"
echo "d2h = the server's spans from each response; server_total also holds input_stage, output_stage,"
echo "handback and the device gap (every span: the JSON report and docs/TIMING.md)."
echo "On a CPU-only machine the h2d/compute/d2h spans are host-timed (timing.clock=host)."
echo "Reports: build/demo-report.json, build/demo-report.html"

#!/bin/bash
# Why a request after an idle second is slower than back to back (issue 6's "1 s idle / back to
# back"), by changing one thing at a time around the same server and measuring the same round trips
# (run_idle_sweep.sh's: raw 64-byte ping-pong over TCP loopback and a Unix socket pair, gRPC
# ServerLive, the policy net at batch 128 with CUDA graphs, keep-warm 10 ms and tensors in system
# shared memory, all over the server's Unix socket), back to back and after GAP_MS of idle time:
#   as_is       the host as it is
#   spin        one busy loop per CPU (of SPIN_CPUS, default all) at SCHED_IDLE priority: those
#               CPUs never halt, but any real thread preempts the loop at once (what the
#               kernel's idle=poll does)
#   ping_live   another client sends the server a ServerLive every PING_MS
#   ping_infer  another client sends the server a batch-1 inference every PING_MS
#   host_keep_warm  the server runs with --host-keep-warm-ms 60000 (its own SCHED_IDLE spinners on
#               the CPUs it may run on: `spin` made a server feature)
#   A+B         both (e.g. spin+ping_infer)
# If `spin` removes the idle cost, it is the CPUs' wake-up from halt; if only the pings remove it,
# it is the server's code and data going cold. A condition may be listed more than once (rounds).
# SERVER_CPUS / CLIENT_CPUS (taskset lists, default unset) split the host between the server (and
# the pingers) and the measuring clients. Writes idle_causes.json.
# Usage: benchmarks/run_idle_causes.sh BUILD_DIR OUT_DIR [PORT]
# Environment (defaults): CONDITIONS="as_is spin ping_live ping_infer spin+ping_infer host_keep_warm" GAP_MS=1000 IDLE_REQUESTS=8 PING_MS=5
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8073}
conditions=${CONDITIONS:-as_is spin ping_live ping_infer spin+ping_infer host_keep_warm}
gap_ms=${GAP_MS:-1000}
idle_requests=${IDLE_REQUESTS:-8}
ping_ms=${PING_MS:-5}
server_cpus=${SERVER_CPUS:-}
client_cpus=${CLIENT_CPUS:-}
server_launcher=()
[ -z "$server_cpus" ] || server_launcher=(taskset -c "$server_cpus")
spin_cpus=${SPIN_CPUS:-0-$(( $(nproc) - 1 ))}
on_server_cpus() { ${server_launcher[@]+"${server_launcher[@]}"} "$@"; }
on_client_cpus() { if [ -n "$client_cpus" ]; then taskset -c "$client_cpus" "$@"; else "$@"; fi; }
cpu_list() {  # cpu_list "0-3,8": one CPU number per line
  local part
  for part in ${1//,/ }; do
    if [[ $part == *-* ]]; then seq "${part%-*}" "${part#*-}"; else echo "$part"; fi
  done
}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
source "$here/server_lib.sh"
warm_graph_workspace "$build" || exit 1
status=0
helpers=()
stop_helpers() {
  [ ${#helpers[@]} -gt 0 ] || return 0
  kill "${helpers[@]}" 2>/dev/null
  wait "${helpers[@]}" 2>/dev/null
  helpers=()
}
trap 'stop_helpers; stop_server >/dev/null 2>&1; rm -rf "${scratch_dirs[@]}"' EXIT
start_helpers() {  # start_helpers CONDITION[+CONDITION...]
  local part
  for part in ${1//+/ }; do start_helper "$part" || return 1; done
}
start_helper() {
  case $1 in
    as_is|host_keep_warm) ;;
    spin)
      for cpu in $(cpu_list "$spin_cpus"); do
        taskset -c "$cpu" chrt --idle 0 bash -c 'while :; do :; done' &
        helpers+=($!)
      done ;;
    ping_live)
      on_server_cpus "$build/bin/bench_grpc_floor" -u "unix:$socket_path" -n 1 --warmup-requests 0 --idle-requests 100000000 \
        --idle-gap-ms "$ping_ms" > /dev/null 2>&1 &
      helpers+=($!) ;;
    ping_infer)
      on_server_cpus "$build/bin/bench_serve_latency" -u "unix:$socket_path" -m policy_net -b 1 -n 100000000 --warmup-requests 0 \
        --idle-gap-ms "$ping_ms" > /dev/null 2>&1 &
      helpers+=($!) ;;
    *) echo "unknown condition $1"; return 1 ;;
  esac
}
runs=()
for condition in $conditions; do
  run="${#runs[@]}_$condition"
  runs+=("$run")
  # A server per condition, so that a server flag is a condition like any other.
  flags=()
  [[ "+$condition+" == *+host_keep_warm+* ]] && flags=(--host-keep-warm-ms 60000)
  start_server "$build" "$models" "$out/server-idle-causes-$run.log" "$port" --grpc-unix-socket "$socket_path" \
    "${flags[@]}" > /dev/null || exit 1
  start_helpers "$condition" || { status=1; stop_server; continue; }
  sleep 1  # the helpers get going (no measurement waits on this)
  on_client_cpus "$build/bin/bench_grpc_floor" -u "unix:$socket_path" --raw-sockets -n 300 --warmup-requests 50 \
    --idle-requests "$idle_requests" --idle-gap-ms "$gap_ms" --json "$out/idle_causes_floor_$run.json" > /dev/null || status=1
  on_client_cpus "$build/bin/bench_serve_latency" -u "unix:$socket_path" -m policy_net --shared-memory system -b 128 \
    -n 500 --warmup-requests 50 --label "${run}_b2b" --json "$out/idle_causes_infer_${run}_b2b.json" > /dev/null || status=1
  on_client_cpus "$build/bin/bench_serve_latency" -u "unix:$socket_path" -m policy_net --shared-memory system -b 128 \
    -n "$idle_requests" --warmup-requests 5 --idle-gap-ms "$gap_ms" --label "${run}_idle" \
    --json "$out/idle_causes_infer_${run}_idle.json" > /dev/null || status=1
  stop_helpers
  stop_server || status=1
done

python3 - "$out" "${runs[*]}" "$gap_ms" <<'PY' || status=1
import json, sys
out, conditions, gap = sys.argv[1], sys.argv[2].split(), sys.argv[3]
def infer(condition, mode):
    p50 = {k: v["p50"] for k, v in json.load(open(f"{out}/idle_causes_infer_{condition}_{mode}.json"))["latency_us"].items()}
    return p50["e2e"], p50["outside_gpu_spans"]
def floor(condition):
    rows = {}
    for s in json.load(open(f"{out}/idle_causes_floor_{condition}.json"))["series"]:
        kind = "live" if s["path"].startswith("gRPC") else ("raw_tcp" if "TCP" in s["path"] else "raw_unix")
        rows[f"{kind}_{'b2b' if s['mode'] == 'back_to_back' else 'idle'}"] = s["p50_us"]
    return rows
print(f"p50 us, back to back / after {gap} ms idle (ratio)")
print(f"{'condition':<18}{'raw TCP':>20}{'raw unix':>20}{'gRPC live':>20}{'policy net bs128 e2e':>24}{'e2e - GPU b2b':>15}")
summary = {"gap_ms": int(gap), "conditions": {}}
for c in conditions:
    try:
        row = floor(c)
        (row["infer_b2b"], row["outside_gpu_b2b"]), (row["infer_idle"], _) = infer(c, "b2b"), infer(c, "idle")
    except (OSError, KeyError, ValueError) as e:
        print(f"{c:<18} missing: {e}")
        continue
    summary["conditions"][c] = row
    cells = [f"{row[k + '_b2b']:.0f} / {row[k + '_idle']:.0f} ({row[k + '_idle'] / row[k + '_b2b']:.2f})"
             for k in ("raw_tcp", "raw_unix", "live", "infer")]
    print(f"{c:<18}{cells[0]:>20}{cells[1]:>20}{cells[2]:>20}{cells[3]:>24}{row['outside_gpu_b2b']:>15.0f}")
json.dump(summary, open(f"{out}/idle_causes.json", "w"), indent=2)
PY
exit $status

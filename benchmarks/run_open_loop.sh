#!/bin/bash
# chronobench's open loop on the device (issue 5, the SendWaker of docs/CHRONOBENCH.md): how close
# the sends come to their intended times, and what the client's own CPU costs per send, as the rate
# rises. One server (the policy net with CUDA graphs where a GPU is, batch-1 requests), then per
# rate, distribution and client thread count one chronobench run (--request-rate-range RATE). Per
# run: the rate asked and reached, the schedule lag (sent - intended) p50 / p99, e2e p50 / p99 from
# the intended send time, the busiest worker thread's CPU share, and chronobench's whole CPU time
# per request (user + sys from bash's `time`, warm-up and start-up included, so an upper bound), and
# its CPU by thread name (cb-load: the load workers, cb-wake: their SendWakers, the rest gRPC's).
# Writes one JSON per run and open_loop_summary.json.
#
# Usage: benchmarks/run_open_loop.sh BUILD_DIR OUT_DIR [PORT]
# Environment (defaults): RATES="1000 5000 20000" DISTRIBUTIONS="constant poisson" CLIENT_THREADS="1 4"
#   WINDOW_MS=2000 TRIALS=3 GRAPHS=1 (0: eager) POLLS="default" (values of chronobench's
#   --max-send-poll-us to run each point with; "default" = the flag left out; file names get "_pN")
# On a CPU-only machine, small rates, e.g.: RATES="200 1000" WINDOW_MS=1000 benchmarks/run_open_loop.sh build /tmp/ol
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8061}
rates=${RATES:-1000 5000 20000}
distributions=${DISTRIBUTIONS:-constant poisson}
client_threads=${CLIENT_THREADS:-1 4}
polls=${POLLS:-default}
window_ms=${WINDOW_MS:-2000}
trials=${TRIALS:-3}
mkdir -p "$out"
models=$(mktemp -d)
timed=""
source "$(dirname "$0")/server_lib.sh"
# A chronobench still running (the script interrupted) is stopped too.
trap '[ -n "$timed" ] && pkill -P "$timed" -x chronobench; stop_server >/dev/null 2>&1; rm -rf "$models"' EXIT
"$build/bin/chronoserve-examples" --out "$models" >/dev/null || exit 1
[ "${GRAPHS:-1}" = 1 ] && printf '%s\n' 'optimization { cuda { graphs: true } }' >> "$models/policy_net/config.pbtxt"
start_server "$build" "$models" "$out/open_loop_server.log" "$port" || exit 1
status=0
runs=()
# sample_threads SUBSHELL_PID FILE: while chronobench (the subshell's child) runs, its CPU by thread
# name, in clock ticks, from 1 s after its start to its end (start-up left out; a thread's figure
# is as of the last 0.2 s pass that saw it), in FILE as "NAME THREADS TICKS SECONDS" lines. One
# `cat` a pass, so the sampler itself forks little beside the processes it watches.
sample_threads() {
  local pid="" t0 t1 snaps
  for _ in $(seq 1 50); do pid=$(pgrep -P "$1" -x chronobench) && break; sleep 0.02; done
  [ -n "$pid" ] || return 0
  sleep 1
  snaps=$(mktemp)
  t0=$(date +%s.%N)
  t1=$t0
  while kill -0 "$pid" 2>/dev/null; do
    # Every thread's /proc stat line; a thread that has ended keeps its line from an earlier pass.
    cat /proc/"$pid"/task/*/stat >> "$snaps" 2>/dev/null && t1=$(date +%s.%N)
    sleep 0.2
  done
  python3 - "$t0" "$t1" "$snaps" "$2" <<'PY'
import sys
t0, t1, snaps, path = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
first, last, names = {}, {}, {}
for line in open(snaps):
    # "TID (NAME) STATE ... UTIME STIME ...": the name may hold spaces and parentheses, so the
    # fields are counted after its last ')': utime and stime are fields 14 and 15 of the line.
    head, _, tail = line.rpartition(")")
    fields = tail.split()
    if "(" not in head or len(fields) < 13 or not (fields[11].isdigit() and fields[12].isdigit()):
        continue  # a line cut short as its thread ended
    tid, name = head.split(" (", 1)
    name, ticks = name.replace(" ", "_"), int(fields[11]) + int(fields[12])
    first.setdefault(tid, ticks)
    last[tid] = max(last.get(tid, 0), ticks)
    names[tid] = name
by_name = {}
for tid, ticks in last.items():
    n, t = by_name.get(names[tid], (0, 0))
    by_name[names[tid]] = (n + 1, t + ticks - first[tid])
with open(path, "w") as f:
    for name, (n, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        f.write(f"{name} {n} {t} {t1 - t0:.2f}\n")
PY
  rm -f "$snaps"
}
for poll in $polls; do
 poll_flag=()
 [ "$poll" = default ] || poll_flag=(--max-send-poll-us "$poll")
 for threads in $client_threads; do
  for dist in $distributions; do
    for rate in $rates; do
      name="open_loop_${dist}_${rate}_t${threads}"
      [ "$poll" = default ] || name="${name}_p${poll}"
      # bash's `time` reports the child's user and system CPU and the wall time, in seconds.
      TIMEFORMAT='%U %S %R'
      { time "$build/bin/chronobench" -m policy_net -u "127.0.0.1:$port" -b 1 --request-rate-range "$rate" \
          --request-distribution "$dist" --threads "$threads" -p "$window_ms" -r "$trials" -s 100 \
          --warmup-requests 200 ${poll_flag[@]+"${poll_flag[@]}"} --json "$out/$name.json" > "$out/$name.txt" 2>&1 ; } \
          2> "$out/$name.time" &
      timed=$!
      sample_threads "$timed" "$out/$name.threads"
      wait "$timed" || { echo "chronobench failed at $name:"; tail -5 "$out/$name.txt"; status=1; continue; }
      runs+=("$name:$poll")
    done
  done
 done
done
stop_server || status=1
python3 - "$out" "${runs[@]}" <<'EOF' || status=1
import json, sys
out, runs = sys.argv[1], sys.argv[2:]
rows = []
print(f"{'max poll':>8} {'distribution':>12} {'threads':>7} {'asked/s':>8} {'reached/s':>9} {'lag p50':>8} {'lag p99':>8} "
      f"{'e2e p50':>8} {'e2e p99':>8} {'busiest':>7} {'client cores':>12} {'client us/req':>13}")
import os
ticks_per_s = os.sysconf("SC_CLK_TCK")
summary = lambda h, key: h[key] if h else float("nan")  # a histogram with no value is null
for run in runs:
    name, poll = run.rsplit(":", 1)
    report = json.load(open(f"{out}/{name}.json"))
    point = report["runs"][-1]
    user, sys_, wall = (float(v) for v in open(f"{out}/{name}.time").read().split()[-3:])
    requests = sum(w["requests"] for w in point["windows"])
    row = {
        "run": name,
        "distribution": name.split("_")[2],
        "threads": int(name.split("_")[4][1:]),
        "max_send_poll_us": poll,
        "asked_rps": point["rate"],
        "reached_rps": point["throughput_rps"],
        "schedule_lag_p50_us": summary(point["schedule_lag_us"], "p50"),
        "schedule_lag_p99_us": summary(point["schedule_lag_us"], "p99"),
        "e2e_p50_us": summary(point["latency_us"]["e2e"], "p50"),
        "e2e_p99_us": summary(point["latency_us"]["e2e"], "p99"),
        "client_cpu_busiest": max(w["client_cpu_busiest"] for w in point["windows"]),
        "client_cores": (user + sys_) / wall,
        "client_cpu_us_per_request_upper": (user + sys_) * 1e6 / max(requests, 1),
        "errors": point["errors"],
    }
    rows.append(row)
    print(f"{row['max_send_poll_us']:>8} {row['distribution']:>12} {row['threads']:>7} {row['asked_rps']:>8.0f} {row['reached_rps']:>9.0f} "
          f"{row['schedule_lag_p50_us']:>8.1f} {row['schedule_lag_p99_us']:>8.1f} {row['e2e_p50_us']:>8.0f} "
          f"{row['e2e_p99_us']:>8.0f} {row['client_cpu_busiest']:>7.2f} {row['client_cores']:>12.2f} "
          f"{row['client_cpu_us_per_request_upper']:>13.1f}")
    # CPU by thread name over the sampled span, in cores.
    try:
        by_thread = [l.split() for l in open(f"{out}/{name}.threads")]
        row["cores_by_thread"] = {n: int(t) / ticks_per_s / float(s) for n, _, t, s in by_thread if float(s) > 0}
        print("      by thread: " + ", ".join(f"{n} {c:.2f}" for n, c in row["cores_by_thread"].items() if c >= 0.01))
    except (OSError, ValueError):
        pass
json.dump(rows, open(f"{out}/open_loop_summary.json", "w"), indent=1)
EOF
exit $status

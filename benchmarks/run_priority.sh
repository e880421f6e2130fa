#!/bin/bash
# Is the served worker slowed by other threads taking its CPU? (issue 3's 85 % at concurrency 256:
# at a served point the server and chronobench ask for ~13 of 16 cores and the worker is preempted
# hundreds of times a second.) run_streaming.sh (policy net, concurrency 256, batch-1 requests,
# delay 0) once per priority layout in LAYOUTS, each "WORKER_NICE:CLIENT_NICE" ("0:0" = as is;
# "-10:0" = --host-policy gpu_0,nice=-10; "0:10" = chronobench under nice 10), ROUNDS times in
# turn, then one table of every point: items/s, served / in-process, the worker's phases per batch
# and its involuntary context switches per second. Files under OUT/FORWARD/LAYOUT_rROUND.
#
# Usage: benchmarks/run_priority.sh BUILD_DIR OUT_DIR [PORT]
# Environment: FORWARDS="graphs", LAYOUTS="0:0 -10:0 0:10 -10:10", ROUNDS=1, and run_streaming.sh's
#   (CONNECTIONS, TRANSPORTS, THREADS, ...). Renicing below 0 needs root (or CAP_SYS_NICE).
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8053}
here=$(dirname "$0")
source "$here/server_lib.sh"
status=0
for forward in ${FORWARDS:-graphs}; do
  for round in $(seq 1 "${ROUNDS:-1}"); do
    for layout in ${LAYOUTS:-0:0 -10:0 0:10 -10:10}; do
      echo "== forward $forward, round $round, worker nice ${layout%%:*}, chronobench nice ${layout#*:}"
      worker_nice=${layout%%:*}; client_nice=${layout#*:}  # 0: as is (no setting at all)
      EXTRA_CONFIG="$(forward_config "$forward")" DELAYS=0 PIN=off WORKER_NICE="${worker_nice#0}" \
        CLIENT_NICE="${client_nice#0}" bash "$here/run_streaming.sh" "$build" "$out/$forward/${layout}_r$round" "$port" \
        | sed -n '/^ delay us/,$p' || status=1
    done
  done
done
python3 - "$out" <<'PY' || status=1
import glob, json, os, sys
out = sys.argv[1]
print(f"{'forward':>8}{'layout':>8}{'round':>6}{'transport':>10}{'conns':>6}{'items/s':>9}{'batch':>7}{'served/in-proc':>15}"
      f"{'gather':>8}{'launch':>8}{'finish':>8}{'complete':>9}{'in-proc launch':>15}{'worker invol/s':>15}")
rows = []
for f in sorted(glob.glob(f"{out}/*/*_r*/streaming_summary.json")):
    forward, run = f.split("/")[-3:-1]
    layout, _, rnd = run.rpartition("_r")
    for x in json.load(open(f)):
        ph = x["worker_us_per_batch"]
        rows.append(dict(x, forward=forward, layout=layout, round=int(rnd)))
        print(f"{forward:>8}{layout:>8}{rnd:>6}{x['transport']:>10}{x['connections']:>6}{x['items_per_s']:>9.0f}"
              f"{x['batch_reached']:>7.1f}{(x['ratio'] or 0) * 100:>14.1f}%"
              + "".join(f"{ph.get(k, 0):>{w}.0f}" for k, w in (("gather", 8), ("launch", 8), ("finish", 8), ("complete", 9)))
              + f"{x['inprocess_launch_us']:>15.0f}{x['host'].get('worker_involuntary_switches_per_s', 0):>15}")
json.dump(rows, open(f"{out}/priority_summary.json", "w"), indent=2)
PY
exit $status

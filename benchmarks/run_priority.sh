#!/bin/bash
# Is the served worker slowed by other threads taking its CPU? (issue 3's 85 % at concurrency 256:
# at a served point the server and chronobench ask for ~13 of 16 cores and the worker is preempted
# hundreds of times a second.) run_streaming.sh (policy net, concurrency 256, batch-1 requests,
# delay 0) once per priority layout in LAYOUTS, each "WORKER_NICE:CLIENT_NICE" ("0:0" = as is;
# "-10:0" = --host-policy gpu_0,nice=-10; "0:10" = chronobench under nice 10), ROUNDS times in
# turn, then one table of every point: items/s, served / in-process, the worker's phases per batch
# and its involuntary context switches per second (variant_table). Files under
# OUT/FORWARD/LAYOUT/roundN.
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
      worker_nice=${layout%%:*}; client_nice=${layout#*:}  # 0: as is (no setting at all)
      echo "== forward $forward, round $round, worker nice $worker_nice, chronobench nice $client_nice"
      EXTRA_CONFIG="$(forward_config "$forward")" DELAYS=0 PIN=off WORKER_NICE="${worker_nice#0}" \
        CLIENT_NICE="${client_nice#0}" bash "$here/run_streaming.sh" "$build" "$out/$forward/$layout/round$round" "$port" \
        | sed -n '/^ delay us/,$p' || status=1
    done
  done
done
variant_table "$out" priority forward layout round || status=1
exit $status

#!/bin/bash
# Does the worker need a core of its own? (issue 3's 85 % at concurrency 256.) run_streaming.sh
# (policy net, concurrency 256, batch-1 requests, delay 0, unary and streaming at 1 and 4
# connections) twice per forward (CUDA graphs, then eager): once as before, once with the model's
# worker pinned to the last CPU by --host-policy and the rest of the server and chronobench kept off
# it and its hyperthread siblings with taskset. Each run's served / in-process table is printed; files under OUT/graphs and
# OUT/eager (names with "_pin" for the pinned layout).
#
# Usage: benchmarks/run_pinning.sh BUILD_DIR OUT_DIR [PORT]
# Environment: FORWARDS="graphs eager", PIN (default "off LAST_CPU:0-OTHERS"; "off" alone runs
# unpinned only), and run_streaming.sh's (CONCURRENCY, CONNECTIONS, THREADS, ...).
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8052}
here=$(dirname "$0")
source "$here/server_lib.sh"
cpus=$(nproc)
[ "$cpus" -ge 2 ] || { echo "run_pinning.sh needs 2 CPUs or more"; exit 1; }
# The worker gets the last CPU; nothing else runs on it or on its hyperthread siblings (which share
# its core's execution units), so the layout reads e.g. "15:0-6,8-14" where CPU 7 is 15's sibling.
worker_cpu=$((cpus - 1))
siblings=$(cat "/sys/devices/system/cpu/cpu$worker_cpu/topology/thread_siblings_list" 2>/dev/null || echo "$worker_cpu")
load=$(python3 - "$cpus" "$siblings" <<'PY'
import sys
n, text = int(sys.argv[1]), sys.argv[2]
busy = set()
for item in text.split(","):
    lo, _, hi = item.partition("-")
    busy.update(range(int(lo), int(hi or lo) + 1))
free = [c for c in range(n) if c not in busy]
print(",".join(str(c) for c in free))
PY
)
[ -n "$load" ] || { echo "no CPU left for the load once CPU $worker_cpu and its siblings ($siblings) are reserved"; exit 1; }
layout="$worker_cpu:$load"
echo "== CPU $worker_cpu's hyperthread siblings: $siblings"
echo "== pinning layout (worker CPUs:everything else): $layout"
status=0
for forward in ${FORWARDS:-graphs eager}; do
  echo "== forward: $forward"
  EXTRA_CONFIG="$(forward_config "$forward")" DELAYS="${DELAYS:-0}" PIN="${PIN:-off $layout}" bash "$here/run_streaming.sh" "$build" "$out/$forward" "$port" || status=1
done
exit $status

# Sourced by the benchmark scripts: start chronoserve, wait (bounded) until it is READY, stop it.
# Sets $server to the server's pid.

# start_server BUILD_DIR REPOSITORY LOG PORT [extra chronoserve flags...]. The array server_launcher,
# when set, goes before the binary (e.g. server_launcher=(taskset -c 0-7)).
start_server() {
  local build=$1 repo=$2 log=$3 port=$4
  shift 4
  ${server_launcher[@]+"${server_launcher[@]}"} "$build/bin/chronoserve" --model-repository "$repo" --grpc-port "$port" --metrics-port 0 "$@" > "$log" 2>&1 &
  server=$!
  wait_ready "$log"
}

# wait_ready LOG: waits (5 minutes at most) until the server started as $server logs READY in LOG;
# prints its models' READY lines, or its log and fails if it exits or does not get there.
wait_ready() {
  local log=$1
  for _ in $(seq 1 600); do  # bounded: 5 minutes
    grep -q "server READY\|server up" "$log" && break
    kill -0 "$server" 2>/dev/null || { echo "server exited:"; cat "$log"; return 1; }
    sleep 0.5
  done
  grep -q "server READY" "$log" || { echo "server not ready:"; tail -20 "$log"; return 1; }
  grep "READY on" "$log" | sed 's/^.*] /  /'
}

# stop_server: SIGTERM, then the server's own exit code must be 0 (graceful shutdown).
stop_server() {
  [ -n "${server:-}" ] || return 0
  kill -TERM "$server"
  wait "$server"
  local rc=$?
  server=""
  [ $rc -eq 0 ] || { echo "server exited with $rc after SIGTERM"; return 1; }
}

# write_batching_repo EXAMPLES_DIR DIR MODEL DELAY_US INSTANCES: a one-model repository DIR/MODEL from
# chronoserve-examples' output in EXAMPLES_DIR, its batching and instance lines replaced by
# INSTANCES workers (KIND_AUTO) and, unless DELAY_US is empty, dynamic batching with that delay.
write_batching_repo() {
  local examples=$1 dir=$2 model=$3 delay_us=$4 instances=$5
  mkdir -p "$dir/$model/1"
  cp "$examples/$model/1/model.pt" "$dir/$model/1/"
  grep -v '^dynamic_batching\|^instance_group' "$examples/$model/config.pbtxt" > "$dir/$model/config.pbtxt"
  echo "instance_group [ { count: $instances kind: KIND_AUTO } ]" >> "$dir/$model/config.pbtxt"
  [ -z "$delay_us" ] || echo "dynamic_batching { max_queue_delay_microseconds: $delay_us }" >> "$dir/$model/config.pbtxt"
}

# minor_faults PID: the minor page faults of a process so far.
minor_faults() { awk '{print $10}' "/proc/$1/stat"; }

# cpu_ticks PID: user + system CPU time of a process so far, in clock ticks (getconf CLK_TCK).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# thread_cpus PID: the CPUs PID's worker and gRPC completion-queue threads last ran on (ps psr), as
# "worker 5 grpc 2,7".
thread_cpus() {
  ps -L -o psr=,comm= -p "$1" | awk '
    $2 == "cs-worker" { w = w (w == "" ? "" : ",") $1 }
    $2 ~ /^cs-grpc-cq/ { g = g (g == "" ? "" : ",") $1 }
    END { print "worker " w " grpc " g }'
}

# thread_id PID NAME: the id of PID's first thread called NAME; nothing when it has none.
thread_id() {
  grep -lx "$2" /proc/"$1"/task/*/comm 2>/dev/null | head -1 | cut -d/ -f5
}

# tlb_shootdowns: the machine's TLB shootdown interrupts so far (the "TLB:" row of /proc/interrupts
# summed over CPUs; 0 where it has none). Each is an interrupt to every CPU that runs a thread of a
# process whose memory map changed (munmap, madvise, mprotect): those CPUs lose their TLB entries.
tlb_shootdowns() {
  awk '$1 == "TLB:" { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i } END { print s + 0 }' /proc/interrupts
}

# host_counters PID: tlb_shootdowns, PID's minor page faults, and the voluntary and involuntary
# context switches of PID's cs-worker thread (0 0 without one), on one line.
host_counters() {
  local tid
  tid=$(thread_id "$1" cs-worker)
  printf '%s %s %s\n' "$(tlb_shootdowns)" "$(stat_field "$1" 10)" \
    "$( { [ -n "$tid" ] && cat /proc/"$1"/task/"$tid"/status 2>/dev/null; } |
        awk '/^voluntary_ctxt_switches/ { v = $2 } /^nonvoluntary_ctxt_switches/ { n = $2 } END { print v + 0, n + 0 }')"
}

# stat_field PID N: field N of /proc/PID/stat (1-based, counting the command as field 2).
stat_field() {
  local stat
  stat=$(cat /proc/"$1"/stat 2>/dev/null) || { echo 0; return; }
  echo "${stat##*) }" | awk -v n="$2" '{ print $(n - 2) }'
}

# host_rates BEFORE AFTER SECONDS: host_counters' two readings as rates per second, in words.
host_rates() {
  python3 -c '
import sys
b, a, s = sys.argv[1].split(), sys.argv[2].split(), float(sys.argv[3])
r = [(float(y) - float(x)) / s for x, y in zip(b, a)]
print(f"TLB shootdowns {r[0]:.0f}/s, server minor faults {r[1]:.0f}/s, "
      f"worker context switches {r[2]:.0f}/s voluntary, {r[3]:.0f}/s involuntary")' "$1" "$2" "$3"
}

# scratch_dir VAR: makes a temporary directory, stores its path in VAR, and on the script's exit
# stops a server still running (stop_server) and removes every directory made this way.
scratch_dirs=()
scratch_dir() {
  local dir
  dir=$(mktemp -d) || return 1
  scratch_dirs+=("$dir")
  printf -v "$1" '%s' "$dir"
  trap 'stop_server >/dev/null 2>&1; rm -rf "${scratch_dirs[@]}"' EXIT
}

# thread_ticks PID FILE: every thread's name and user + system CPU ticks so far, as "name<TAB>ticks"
# lines in FILE (a thread's name is in parentheses in /proc/.../stat and may hold spaces).
thread_ticks() {
  local t stat
  : > "$2"
  for t in /proc/"$1"/task/*; do
    stat=$(cat "$t/stat" 2>/dev/null) || continue
    printf '%s\t%s\n' "$(cat "$t/comm" 2>/dev/null)" "$(echo "${stat##*) }" | awk '{print $12 + $13}')" >> "$2"
  done
}

# thread_cores BEFORE AFTER SECONDS: CPU cores used per thread name (digits dropped, so "grpc_x_3"
# and "grpc_x_7" add up) between two thread_ticks files taken SECONDS apart, busiest first, one line.
thread_cores() {
  python3 - "$1" "$2" "$3" "$(getconf CLK_TCK)" <<'PY'
import collections, re, sys
def load(path):
    out = collections.Counter()
    for line in open(path):
        name, _, ticks = line.rstrip("\n").rpartition("\t")
        out[re.sub(r"[0-9]+", "", name) or "?"] += int(ticks or 0)
    return out
before, after = load(sys.argv[1]), load(sys.argv[2])
seconds, hz = float(sys.argv[3]), float(sys.argv[4])
cores = {name: (after[name] - before.get(name, 0)) / hz / seconds for name in after}
print(", ".join(f"{name} {c:.2f}" for name, c in sorted(cores.items(), key=lambda x: -x[1]) if c >= 0.01))
PY
}

# write_warm_graph_repo BUILD_DIR DIR: chronoserve-examples' models in DIR, the policy net with CUDA
# graphs and keep-warm every 10 ms (the configuration issue 6's latency ratios are measured on).
write_warm_graph_repo() {
  "$1/bin/chronoserve-examples" --out "$2" >/dev/null || return 1
  printf '%s\n' 'optimization { cuda { graphs: true } }' \
    'parameters { key: "keep_warm_ms" value { string_value: "10" } }' >> "$2/policy_net/config.pbtxt"
}

# warm_graph_workspace BUILD_DIR: a scratch directory $work (removed at exit) holding the warm graph
# repository $models (write_warm_graph_repo) and the path $socket_path for --grpc-unix-socket.
warm_graph_workspace() {
  scratch_dir work || return 1
  models=$work/models
  socket_path=$work/chronoserve.sock
  write_warm_graph_repo "$1" "$models"
}

# round_order ROUND LIST...: LIST as given in odd rounds and reversed in even ones, so that alternating
# rounds cancel a steady drift of the machine.
round_order() {
  local round=$1
  shift
  if [ $((round % 2)) -eq 0 ]; then printf '%s\n' "$@" | tac | tr '\n' ' '; else echo "$*"; fi
}

# ab_start ROUND VARIANT NEW_BUILD BASE_BUILD OUT REPOSITORY PORT: one A/B run's server: VARIANT's
# build (BASE_BUILD for "base", else NEW_BUILD, left in $dir) started on REPOSITORY, its log in
# OUT/VARIANT/roundROUND/ (made, and left in $run).
ab_start() {
  local round=$1 variant=$2
  dir=$3
  [ "$variant" = base ] && dir=$4
  run="$5/$variant/round$round"
  mkdir -p "$run"
  echo "== round $round, $variant ($dir)"
  start_server "$dir" "$6" "$run/server.log" "$7"
}

# forward_config FORWARD: the config.pbtxt line that makes a model run FORWARD: "graphs" (CUDA
# graphs); nothing for "eager".
forward_config() {
  [ "$1" != graphs ] || echo 'optimization { cuda { graphs: true } }'
}

# write_eager_and_graph_repos BUILD_DIR DIR: chronoserve-examples' repository twice, DIR/eager as
# written and DIR/graphs with CUDA graphs on for the policy net.
write_eager_and_graph_repos() {
  "$1/bin/chronoserve-examples" --out "$2/eager" >/dev/null || return 1
  "$1/bin/chronoserve-examples" --out "$2/graphs" >/dev/null || return 1
  forward_config graphs >> "$2/graphs/policy_net/config.pbtxt"
}

# worker_share LOG SECONDS: from the "time by phase" lines a server logs when its models stop, each
# worker's busy time (every phase but wait) per second of a SECONDS-long point that was the server's
# only load, by phase ("m:2/0" for version 2 where several serve): "policy_net/0: busy 0.81 = finish 0.42, launch 0.22, ..." (the time the
# server idled before and after the point is all wait); where the line counts the worker's batches
# (request timing on or off), also its busy time per batch: "; per batch of 5120: finish 31.2 us, ...".
worker_share() {
  python3 - "$1" "$2" <<'PY'
import re, sys
seconds = float(sys.argv[2])
for line in open(sys.argv[1]):
    # "model 'm' worker 0 ...", or "model 'm' version 2 worker 0 ..." where several versions serve.
    m = re.search(r"model '([^']+)'(?: version (\d+))? worker (\d+) time by phase: (.*)$", line)
    if not m or seconds <= 0:
        continue
    model = m[1] if m[2] is None else f"{m[1]}:{m[2]}"
    totals = {name: float(sec) for name, sec in re.findall(r"(\w+) ([0-9.]+) s", m[4]) if name != "wait"}
    busy = {name: sec / seconds for name, sec in totals.items()}
    shares = ", ".join(f"{p} {v:.2f}" for p, v in sorted(busy.items(), key=lambda x: -x[1]) if v >= 0.005)
    per_batch = ""
    counted = re.search(r"; (\d+) batches", m[4])
    if counted and int(counted[1]) > 0:
        n = int(counted[1])
        per_batch = f"; per batch of {n}: " + ", ".join(
            f"{p} {sec * 1e6 / n:.1f} us" for p, sec in sorted(totals.items(), key=lambda x: -x[1]) if sec > 0)
    print(f"{model}/{m[3]}: busy {sum(busy.values()):.2f} = {shares}{per_batch}")
PY
}

# perf_report DATA TXT [threads]: perf's profile in DATA into TXT: self time by shared object (with
# "threads": by thread name and shared object, for a whole process), then also by symbol; when DATA
# has call graphs (PERF_CALLGRAPH), time including callees by symbol and the callers of the symbols
# with the most self time. Its first PERF_LINES (40) lines are printed.
perf_report() {
  local keys=dso limit=1 callers=2
  [ "${3:-}" = threads ] && { keys=comm,dso; limit=0.5; callers=1.5; }
  { perf report -i "$1" --stdio -n --no-children --sort "$keys" --percent-limit "$limit" -g none 2>/dev/null | grep -v '^#' | grep -v '^$'
    echo "by symbol:"
    perf report -i "$1" --stdio -n --no-children --sort "$keys,sym" --percent-limit 0.3 -g none 2>/dev/null | grep -v '^#' | grep -v '^$'
    if [ -n "${PERF_CALLGRAPH:-}" ]; then
      echo "including callees:"
      perf report -i "$1" --stdio --children --sort sym --percent-limit 1 -g none 2>/dev/null | grep -v '^#' | grep -v '^$'
      echo "callers of the symbols with the most self time:"
      perf report -i "$1" --stdio --no-children --sort "$keys,sym" --percent-limit "$callers" \
        -g "caller,$callers,callee,function,percent" 2>/dev/null | grep -v '^#' | grep -v '^$'
    fi
  } > "$2"
  head -n "${PERF_LINES:-40}" "$2" | sed 's/^/     /'
}

# wait_for_header FILE PID: until bench_inprocess_throughput's output FILE holds its table header
# (printed once the model is loaded and warm: a profiler attaches then) or PID has exited; at most 5
# minutes.
wait_for_header() {
  local file=$1 pid=$2
  for _ in $(seq 1 1500); do
    grep -q "items/s" "$file" 2>/dev/null || ! kill -0 "$pid" 2>/dev/null && break
    sleep 0.2
  done
}

# perf_sample TARGET DATA [COMMAND...]: `perf record` at PERF_HZ (default 4999, call graphs of the
# kind PERF_CALLGRAPH names, e.g. "dwarf", when set) of TARGET ("-p PID" or "-t TID", one word each)
# into DATA, while COMMAND runs (none: until TARGET exits). Quiet; its status is perf's.
perf_sample() {
  local target=$1 data=$2
  shift 2
  # shellcheck disable=SC2086
  perf record -q -F "${PERF_HZ:-4999}" ${PERF_CALLGRAPH:+--call-graph "$PERF_CALLGRAPH"} $target -o "$data" \
    ${1:+--} "$@" 2>/dev/null
}

# profile_thread PID NAME DATA SECONDS: samples the first thread of PID called NAME for SECONDS with
# perf into DATA (perf_sample).
profile_thread() {
  local tid
  tid=$(thread_id "$1" "$2")
  [ -n "$tid" ] || { echo "   no thread '$2' in $1 to profile"; sleep "$4"; return 0; }
  perf_sample "-t $tid" "$3" sleep "$4" || echo "   perf record failed"
}

# variant_table OUT NAME LABEL...: one table of the points of every run_streaming.sh run under OUT, each
# written to OUT/V1/.../Vn (n = the number of LABELs: the variants, e.g. "allocator forward" for
# OUT/jemalloc/graphs), one row a point, sorted by the variants in LABEL order: items/s, p50,
# batch, the server's CPU cores, served / in-process, the worker's phases per batch beside the
# in-process calls, TLB shootdowns/s and the worker's involuntary context switches/s. The rows, labelled, go to OUT/NAME_summary.json.
variant_table() {
  python3 - "$@" <<'PY'
import glob, json, os, re, sys
out, name, labels = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = []
for path in sorted(glob.glob(os.path.join(out, *["*"] * len(labels), "streaming_summary.json"))):
    variant = os.path.relpath(os.path.dirname(path), out).split(os.sep)
    rows.extend(dict(x, **dict(zip(labels, variant))) for x in json.load(open(path)))
natural = lambda s: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(s))]  # items4 before items16
rows.sort(key=lambda x: tuple(natural(x[l]) for l in labels) + (x["transport"], x["connections"]))
widths = [max([len(l), 6] + [len(str(x[l])) for x in rows]) + 2 for l in labels]
print("".join(f"{l:>{w}}" for l, w in zip(labels, widths)) + f"{'transport':>10}{'conns':>6}{'items/s':>9}{'p50 us':>8}"
      f"{'batch':>7}{'srv cores':>10}{'served/in-proc':>15}{'gather':>8}{'launch':>8}{'finish':>8}{'complete':>9}{'in-proc launch':>15}"
      f"{'of it gather':>13}{'in-proc finish':>15}{'TLB/s':>7}{'worker invol/s':>15}{'served/mix':>11}")
for x in rows:
    ph, host = x["worker_us_per_batch"], x.get("host", {})
    print("".join(f"{x[l]:>{w}}" for l, w in zip(labels, widths))
          + f"{x['transport']:>10}{x['connections']:>6}{x['items_per_s']:>9.0f}{x['e2e_p50_us']:>8.0f}"
          f"{x['batch_reached'] or 0:>7.1f}{x['server_cpu_cores']:>10.2f}{(x['ratio'] or 0) * 100:>14.1f}%"
          + "".join(f"{ph.get(k, 0):>{w}.0f}" for k, w in (("gather", 8), ("launch", 8), ("finish", 8), ("complete", 9)))
          + f"{x['inprocess_launch_us']:>15.0f}{x.get('inprocess_gather_us', 0):>13.0f}{x['inprocess_finish_us']:>15.0f}"
          f"{host.get('tlb_shootdowns_per_s', -1):>7}{host.get('worker_involuntary_switches_per_s', -1):>15}"
          f"{(x.get('ratio_to_mix') or 0) * 100:>10.1f}%")
json.dump(rows, open(os.path.join(out, f"{name}_summary.json"), "w"), indent=2)
PY
}

# chronobench_table LABEL=JSON...: one row a chronobench report (its first point), labelled: requests/s,
# the p50 µs of e2e, transport, server_total, queue, h2d, compute, d2h, device gap and launch, the
# items per executed batch and the errors. A missing file or a report without points is skipped.
chronobench_table() {
  python3 - "$@" <<'PY'
import json, os, sys
cols = ("e2e", "transport", "server_total", "queue", "h2d", "compute", "d2h", "device_gap", "launch")
width = {c: max(len(c) + 1, 7) for c in cols}
print(f"{'point':<22}{'req/s':>9}" + "".join(f"{c:>{width[c]}}" for c in cols) + f"{'items/batch':>12}{'errors':>7}")
for arg in sys.argv[1:]:
    label, path = arg.split("=", 1)
    if not os.path.exists(path):
        continue
    runs = json.load(open(path)).get("runs", [])
    if not runs:
        continue
    run = runs[0]
    p50 = {k: v.get("p50") for k, v in run["latency_us"].items() if isinstance(v, dict)}
    cells = "".join(f"{p50[c]:>{width[c]}.0f}" if p50.get(c) is not None else f"{'-':>{width[c]}}" for c in cols)
    per_batch = run.get("batch_size_executed", {}).get("per_batch_mean") or 0
    print(f"{label:<22}{run['throughput_rps']:>9.0f}{cells}{per_batch:>12.1f}{run['errors']:>7}")
PY
}

#!/bin/bash
# Unary vs streaming at high concurrency (issue 3): the policy net with dynamic batching on, one
# server per max_queue_delay in DELAYS (0 = Triton's default: take what is queued, never wait; 300
# us: wait for a fuller batch), chronobench closed loop at the top concurrency, batch 1 per request
# (ITEMS=N: N items per request), unary and --streaming (ModelStreamInfer) at each --connections
# count (TRANSPORTS=nogrpc adds the server's own path without gRPC, bench_served_path: feeder
# threads in place of gRPC's and the client); the server's CPU use per point (utime+stime from
# /proc); then the in-process reference
# (bench_inprocess_throughput, the same backend without gRPC or queue) at every batch size the
# batcher reached (the items per executed batch; also the older mean over responses) and on each
# point's own mix of batch sizes (--batch-mix), and served / in-process for each point (goal:
# >= 85 %). Writes JSON per point and streaming_summary.json.
#
# Usage: benchmarks/run_streaming.sh BUILD_DIR OUT_DIR [PORT]
# Environment (defaults): MODEL=policy_net CONCURRENCY=256 CONNECTIONS="1 4" THREADS=8 WINDOW_MS=1500
#   TRIALS=3 ITEMS=1 DELAYS="0 300" TRANSPORTS="unary streaming" INSTANCES=1 INPROCESS_REPEATS=3 (in-process runs;
#   items/s and call times the medians) EXTRA_CONFIG="" (appended to config.pbtxt, e.g.
#   'optimization { cuda { graphs: true } }') WARMUP_RUNS=2 ITERATIONS=2000 EXTRA_FLAGS=""
#   URLS="tcp" ("tcp unix": also through the server's --grpc-unix-socket; file names get "_unix")
#   PIN="off" (a list of layouts: "off", or "WORKER_CPUS:LOAD_CPUS" such as "15:0-14": the model's
#   workers pinned with --host-policy gpu_0,cpu-cores=WORKER_CPUS (cpu,... on a CPU-only machine),
#   the rest of the server and chronobench kept on LOAD_CPUS with taskset; file names get "_pin")
# Besides the server's CPU per point, its CPU per thread name (cs-worker, cs-completion, gRPC's own
# threads) and chronobench's, in cores, and the worker's busy time per second of the point by phase
# (take, launch, finish, complete...: the "time by phase" line the server logs at shutdown; one
# server per point) are printed and kept in *_threads.txt.
#   PRELOAD="" (a shared library put in LD_PRELOAD of the server and the in-process reference, e.g. a
#   memory allocator: benchmarks/run_allocators.sh compares them), SERVER_ENV="" (NAME=VALUE words
#   set for both alike, e.g. GLIBC_TUNABLES=...)
#   SERVER_FLAGS="" (words added to the server's command line, e.g. "--grpc-infer-threads 0";
#   benchmarks/run_infer_threads.sh compares them)
#   WORKER_NICE="" (the model's workers at that nice value, e.g. -10, with --host-policy
#   gpu_0,nice=WORKER_NICE: the scheduler then rarely lets another thread preempt them; with PIN,
#   one policy sets both), CLIENT_NICE="" (chronobench runs under
#   `nice -n CLIENT_NICE`, e.g. 10); benchmarks/run_priority.sh compares them
# Per point, and over the in-process reference's run, the host's counters: TLB shootdowns per second
# (machine-wide), the server's minor page faults and its worker's context switches (host_counters).
#   PERF_SERVER="" (1: every thread of the server sampled from 2 s to 3 s of every point instead,
#   reported by thread name and shared object, then by symbol, in *_server_perf.txt)
#   PERF_CLIENT="" (1: chronobench's threads sampled over the same second, in *_client_perf.txt)
#   PERF_WORKER="" (1: with `perf` on PATH, the worker thread is sampled from 2 s to 3 s of every point
#   and the in-process reference from its header on; profiles in *_perf.txt; PERF_HZ=4999,
#   PERF_CALLGRAPH="" (e.g. "dwarf": call graphs, time including callees and the callers of the top
#   symbols in the profiles; slow to report: PERF_HZ=499 and a few thousand ITERATIONS))
# On a CPU-only machine, small counts, e.g.:
#   CONCURRENCY=16 THREADS=2 WINDOW_MS=500 ITERATIONS=20 benchmarks/run_streaming.sh build /tmp/stream
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8051}
model=${MODEL:-policy_net}
concurrency=${CONCURRENCY:-256}
connections=${CONNECTIONS:-1 4}
threads=${THREADS:-8}
window_ms=${WINDOW_MS:-1500}
trials=${TRIALS:-3}
items=${ITEMS:-1}
delays=${DELAYS:-${DELAY_US:-0 300}}
instances=${INSTANCES:-1}
warmup_runs=${WARMUP_RUNS:-2}
iterations=${ITERATIONS:-2000}
extra=${EXTRA_FLAGS:-}
extra_config=${EXTRA_CONFIG:-}
urls=${URLS:-tcp}
pins=${PIN:-off}
server_env=()  # `env NAME=VALUE...` before the server and the in-process reference, or nothing
[ -z "${PRELOAD:-}" ] || server_env=("LD_PRELOAD=$PRELOAD")
# shellcheck disable=SC2206
server_env+=(${SERVER_ENV:-})
[ ${#server_env[@]} -eq 0 ] || server_env=(env "${server_env[@]}")
worker_nice=${WORKER_NICE:-}
# shellcheck disable=SC2206
server_flags=(${SERVER_FLAGS:-})
client_launcher=()
[ -z "${CLIENT_NICE:-}" ] || client_launcher=(nice -n "$CLIENT_NICE")
perf_worker=${PERF_WORKER:-}
[ -z "$perf_worker" ] || command -v perf >/dev/null || { echo "PERF_WORKER: no perf on PATH, not profiling"; perf_worker=""; }
perf_server=${PERF_SERVER:-}
perf_client=${PERF_CLIENT:-}
[ -z "$perf_client" ] || command -v perf >/dev/null || { echo "PERF_CLIENT: no perf on PATH, not profiling"; perf_client=""; }
[ -z "$perf_server" ] || command -v perf >/dev/null || { echo "PERF_SERVER: no perf on PATH, not profiling"; perf_server=""; }
mkdir -p "$out"
source "$(dirname "$0")/server_lib.sh"
scratch_dir work
"$build/bin/chronoserve-examples" --out "$work/examples" >/dev/null || exit 1
hz=$(getconf CLK_TCK)

# The server's own request path without gRPC's transport (TRANSPORTS=nogrpc): bench_served_path in
# place of the server and chronobench, its feeder threads in place of gRPC's, with the server's
# --request-timing from SERVER_FLAGS (its other flags do not apply, nor PIN's --host-policy: its
# taskset does); files named as a point's, with connections 0. Usage: served_path_point NAME LOG
# (the loop's repo, launcher and delay).
served_path_point() {
  local name=$1 log=$2 timing=on i
  for ((i = 0; i < ${#server_flags[@]}; i++)); do
    case ${server_flags[$i]} in
      --request-timing) timing=${server_flags[$((i + 1))]:-on} ;;
      --request-timing=*) timing=${server_flags[$i]#--request-timing=} ;;
    esac
  done
  echo "== the server's path without gRPC (bench_served_path), concurrency $concurrency, $threads feeder threads, delay $delay_us us"
  "${launcher[@]}" "${server_env[@]}" "$build/bin/bench_served_path" --model-repository "$repo" -m "$model" \
    --concurrency "$concurrency" --threads "$threads" -b "$items" --request-timing "$timing" \
    --warmup-requests $((concurrency * 4 > 50 ? concurrency * 4 : 50)) --duration-ms $((window_ms * trials)) \
    --json "$out/$name.json" > "$work/served_path.out" 2> "$log" || {
    # A failed run's JSON (errors, or answers still owed) would stand in the summary without its CPU file.
    cat "$work/served_path.out"; tail -5 "$log"; rm -f "$out/$name.json"; return 1
  }
  tail -n 2 "$work/served_path.out"
  local summary
  summary=$(python3 - "$out/$name.json" "$out/${name}_cpu.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
open(sys.argv[2], "w").write(f"{r['cpu_cores']['process']:.2f}\n")
print(r["feeding_s"])
print(", ".join(f"{n} {c:.2f}" for n, c in sorted(r["cpu_cores"]["threads"].items(), key=lambda x: -x[1]) if c >= 0.01))
PY
) || return 1
  {
    echo "server: $(sed -n 2p <<< "$summary")"
    echo "worker busy per second of the point: $(worker_share "$log" "$(head -1 <<< "$summary")")"
  } > "$out/${name}_threads.txt"
  echo "   process CPU: $(cat "$out/${name}_cpu.txt") cores over the window"
  sed 's/^/   /' "$out/${name}_threads.txt"
}

status=0
for delay_us in $delays; do
  repo=$work/repo_d$delay_us
  write_batching_repo "$work/examples" "$repo" "$model" "$delay_us" "$instances"
  [ -z "$extra_config" ] || printf '%s\n' "$extra_config" >> "$repo/$model/config.pbtxt"
  for pin in $pins; do
    echo "== max_queue_delay_microseconds: $delay_us, pinning: $pin"
    socket_path=$work/chronoserve.sock
    launcher=(); pin_flags=(); pin_suffix=""; settings=""
    if [ "$pin" != off ]; then
      launcher=(taskset -c "${pin#*:}"); settings=",cpu-cores=${pin%%:*}"; pin_suffix="_pin"
    fi
    [ -z "$worker_nice" ] || settings="$settings,nice=$worker_nice"
    if [ -n "$settings" ]; then
      policy=gpu_0
      command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || policy=cpu
      pin_flags=(--host-policy "$policy$settings")
    fi
    for url_kind in $urls; do
      url="127.0.0.1:$port"; suffix="$pin_suffix"
      [ "$url_kind" = unix ] && { url="unix:$socket_path"; suffix="_unix$pin_suffix"; }
      for conns in $connections; do
        for transport in ${TRANSPORTS:-unary streaming}; do
          if [ "$transport" = nogrpc ]; then  # once per delay and pinning layout: no URL, no connections
            [ "$url_kind" = "${urls%% *}" ] && [ "$conns" = "$(set -- $connections; echo "$1")" ] || continue
            served_path_point "nogrpc_c${concurrency}_n0_d${delay_us}${pin_suffix}" "$out/server-nogrpc_d${delay_us}${pin_suffix}.log" \
              || status=1
            continue
          fi
          flag=""
          [ "$transport" = streaming ] && flag="--streaming"
          name="${transport}_c${concurrency}_n${conns}_d${delay_us}${suffix}"
          # A server per point: its log's "time by phase" lines (at shutdown) cover that point alone.
          log="$out/server-$name.log"
          "${launcher[@]}" "${server_env[@]}" "$build/bin/chronoserve" --model-repository "$repo" --grpc-port "$port" \
            --warmup-runs "$warmup_runs" --allow-metrics false --grpc-unix-socket "$socket_path" "${pin_flags[@]}" \
            "${server_flags[@]}" > "$log" 2>&1 &
          server=$!
          wait_ready "$log" > /dev/null || exit 1
          grep -E "pinned to|runs at nice|polling [0-9]+ completion queue" "$log" | sed 's/^.*] /  /'
          echo "== $transport, concurrency $concurrency, $conns connection(s), $threads threads, delay $delay_us us, $url"
          before=$(cpu_ticks "$server"); counters_before=$(host_counters "$server"); t0=$(date +%s.%N)
          thread_ticks "$server" "$work/threads_before"
          # shellcheck disable=SC2086
          "${launcher[@]}" "${client_launcher[@]}" "$build/bin/chronobench" -m "$model" -u "$url" -b "$items" --concurrency-range "$concurrency" \
            --connections "$conns" --threads "$threads" -p "$window_ms" -r "$trials" \
            --warmup-requests $((concurrency * 4 > 50 ? concurrency * 4 : 50)) $flag $extra \
            --json "$out/$name.json" > "$work/chronobench.out" &
          bench=$!
          # chronobench's own CPU by thread over one second of its run (from 2 s to 3 s, past its warm-up).
          sleep 2; thread_ticks "$bench" "$work/bench_before" 2>/dev/null
          if [ -n "$perf_worker" ]; then
            profile_thread "$server" cs-worker "$work/worker.perf.data" 1
          elif [ -n "$perf_server$perf_client" ]; then
            # The server's and chronobench's profiles over the same second.
            client_perf=""
            if [ -n "$perf_client" ]; then
              perf_sample "-p $bench" "$work/client.perf.data" sleep 1 &
              client_perf=$!
            fi
            if [ -n "$perf_server" ]; then
              perf_sample "-p $server" "$work/server.perf.data" sleep 1 || echo "   perf record failed"
            fi
            [ -z "$client_perf" ] || wait "$client_perf" || echo "   perf record of chronobench failed"
          else
            sleep 1
          fi
          thread_ticks "$bench" "$work/bench_after" 2>/dev/null
          wait "$bench" || status=1
          tail -n 3 "$work/chronobench.out"
          after=$(cpu_ticks "$server"); counters_after=$(host_counters "$server"); t1=$(date +%s.%N)
          thread_ticks "$server" "$work/threads_after"
          stop_server || status=1
          python3 -c "import sys; b,a,t0,t1,hz=map(float,sys.argv[1:]); print(f'{(a-b)/hz/(t1-t0):.2f}')" \
            "$before" "$after" "$t0" "$t1" "$hz" > "$out/${name}_cpu.txt"
          elapsed=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1")
          {
            echo "server: $(thread_cores "$work/threads_before" "$work/threads_after" "$elapsed")"
            [ -s "$work/bench_after" ] && echo "chronobench (from 2 s to 3 s): $(thread_cores "$work/bench_before" "$work/bench_after" 1)"
            echo "worker busy per second of the point: $(worker_share "$log" "$elapsed")"
            echo "host: $(host_rates "$counters_before" "$counters_after" "$elapsed")"
          } > "$out/${name}_threads.txt"
          rm -f "$work/bench_before" "$work/bench_after"
          echo "   server CPU: $(cat "$out/${name}_cpu.txt") cores over the point"
          sed 's/^/   /' "$out/${name}_threads.txt"
          if [ -s "$work/worker.perf.data" ]; then  # reported after the point: perf report takes seconds
            echo "   perf, thread cs-worker over 1 s of the point:"
            perf_report "$work/worker.perf.data" "$out/${name}_perf.txt"
            rm -f "$work/worker.perf.data"
          fi
          if [ -s "$work/server.perf.data" ]; then
            echo "   perf, every server thread over 1 s of the point, by thread name:"
            perf_report "$work/server.perf.data" "$out/${name}_server_perf.txt" threads
            rm -f "$work/server.perf.data"
          fi
          if [ -s "$work/client.perf.data" ]; then
            echo "   perf, every chronobench thread over the same second, by thread name:"
            perf_report "$work/client.perf.data" "$out/${name}_client_perf.txt" threads
            rm -f "$work/client.perf.data"
          fi
        done
      done
    done
  done
done

# Every batch size the batcher reached (rounded), for the in-process reference: the items per executed
# batch (each batch once), and the mean over responses (a batch of 16 counted 16 times; the reference
# of sections before BENCHMARKS §36, kept beside it).
reached=$(python3 - "$out" <<'PY'
import glob, json, sys
sizes = set()
for f in glob.glob(f"{sys.argv[1]}/*_c*_n*_d*.json"):
    if f.endswith("_summary.json"):
        continue
    executed = json.load(open(f))["runs"][0]["batch_size_executed"] or {}
    for key in ("per_batch_mean", "mean"):
        sizes.add(max(1, round(executed.get(key) or 1)))
print(",".join(str(s) for s in sorted(sizes)))
PY
)
echo "== in-process reference at the batch sizes reached: ${reached:-?} (the delay does not matter in process)"
# And each point's own mix of batch sizes (batches of size b = responses that said b x items per
# request / b), replayed in process: the reference for exactly the batches that point ran. Written
# once, as "8:120,9:45" by point file in streaming_mixes.json, for the summary to look up.
python3 - "$out" <<'PY' || status=1
import glob, json, os, sys
mixes = {}
for f in sorted(glob.glob(f"{sys.argv[1]}/*_c*_n*_d*.json")):
    if f.endswith("_summary.json"):
        continue
    r = json.load(open(f))["runs"][0]
    by_size = (r["batch_size_executed"] or {}).get("responses_by_size") or {}
    mix = {int(b): max(1, round(n * r["batch_size"] / int(b))) for b, n in by_size.items() if n > 0}
    if mix:
        mixes[os.path.basename(f)] = ",".join(f"{b}:{n}" for b, n in sorted(mix.items()))
json.dump(mixes, open(f"{sys.argv[1]}/streaming_mixes.json", "w"), indent=2)
PY
mix_flags=()
while IFS= read -r mix; do
  [ -n "$mix" ] && mix_flags+=(--batch-mix "$mix")
done < <(python3 -c 'import json, sys; print("\n".join(sorted(set(json.load(open(sys.argv[1])).values()))))' \
           "$out/streaming_mixes.json" 2>/dev/null)
inprocess=("${server_env[@]}" "$build/bin/bench_inprocess_throughput" --model-repository "$repo" -m "$model"
           --batch-sizes "${reached:-1}" "${mix_flags[@]}" -n "$iterations")
# The reference moves between runs on a shared host (BENCHMARKS §36: 122k and 158k items/s at batch 8
# in one call), so it runs INPROCESS_REPEATS times (once under perf): items/s and the call times are
# the medians, the other figures the first run's.
repeats=${INPROCESS_REPEATS:-3}
[ "$repeats" -ge 1 ] 2>/dev/null || { echo "INPROCESS_REPEATS must be 1 or more, not '$repeats'"; exit 2; }
[ -n "$perf_worker" ] && repeats=1
rm -f "$out"/streaming_inprocess*.json  # an earlier run's files in OUT_DIR must not count
tlb_before=$(tlb_shootdowns); t0=$(date +%s.%N)
if [ -n "$perf_worker" ]; then
  inprocess+=(--json "$out/streaming_inprocess_r1.json")
  # Sampled from the moment it prints its header (model loaded, warmed up) until it exits.
  "${inprocess[@]}" > "$work/inprocess.out" &
  reference=$!
  wait_for_header "$work/inprocess.out" "$reference"
  perf_sample "-p $reference" "$work/inprocess.perf.data"
  wait "$reference" || status=1
  cat "$work/inprocess.out"
  echo "   perf, the in-process reference from its header on:"
  perf_report "$work/inprocess.perf.data" "$out/inprocess_perf.txt"
else
  for r in $(seq 1 "$repeats"); do
    "${inprocess[@]}" --json "$out/streaming_inprocess_r$r.json" || status=1
  done
fi
tlb_after=$(tlb_shootdowns); t1=$(date +%s.%N)
# streaming_inprocess.json: the first run's points, items/s and the call times the medians over the
# runs (items_per_s_runs: each run's); no file when no run wrote one.
python3 - "$out" "$repeats" <<'PY' || status=1
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
runs = []
for r in range(1, repeats + 1):
    try:
        runs.append(json.load(open(f"{out}/streaming_inprocess_r{r}.json")))
    except (OSError, ValueError):
        pass  # a run that failed (already counted in the status) leaves the others
if not runs:
    sys.exit("no in-process run wrote its JSON: no reference")
key = lambda p: (p["batch_size"], json.dumps(p.get("batch_mix"), sort_keys=True))
merged = runs[0]
for p in merged["points"]:
    same = [q for run in runs for q in run["points"] if key(q) == key(p)]
    p["items_per_s_runs"] = [q["items_per_s"] for q in same]
    for field in ("items_per_s", "launch_call_mean_us", "finish_call_mean_us", "gather_mean_us"):
        p[field] = statistics.median(q.get(field, 0) for q in same)
merged["runs"] = len(runs)
json.dump(merged, open(f"{out}/streaming_inprocess.json", "w"), indent=2)
PY
python3 -c "import sys; b, a, t0, t1 = map(float, sys.argv[1:]); print(f'   host over the in-process run: TLB shootdowns {(a - b) / (t1 - t0):.0f}/s')" \
  "$tlb_before" "$tlb_after" "$t0" "$t1" | tee "$out/inprocess_host.txt"

python3 - "$out" <<'PY' || status=1
import glob, json, os, re, sys
out = sys.argv[1]
points = json.load(open(f"{out}/streaming_inprocess.json"))["points"]
inproc = {p["batch_size"]: p["items_per_s"] for p in points if p["batch_size"] is not None}
mixes = [(",".join(f"{b}:{n}" for b, n in sorted((int(b), n) for b, n in p["batch_mix"].items())), p["items_per_s"])
         for p in points if p.get("batch_mix")]
try:
    point_mixes = json.load(open(f"{out}/streaming_mixes.json"))
except (OSError, ValueError):
    point_mixes = {}
calls = {p["batch_size"]: (p.get("launch_call_mean_us", 0), p.get("finish_call_mean_us", 0), p.get("gather_mean_us", 0))
         for p in points}
rows = []
for f in sorted(glob.glob(f"{out}/*_c*_n*_d*.json")):
    m = re.search(r"/(unary|streaming|nogrpc)_c(\d+)_n(\d+)_d(\d+)(_unix)?(_pin)?\.json$", f)
    if not m:
        continue
    r = json.load(open(f))["runs"][0]
    # --request-timing off: no batch size in the responses, so no in-process reference either. The
    # reference runs at the items per executed batch; the mean over responses (which counts a batch
    # once per request in it, so leans to the large ones) gives the second, older ratio.
    executed = r["batch_size_executed"] or {}
    reached, per_batch = executed.get("mean"), executed.get("per_batch_mean")
    batch = max(1, round(per_batch)) if per_batch else 0
    ref = inproc.get(batch, 0)
    ref_per_response = inproc.get(max(1, round(reached)), 0) if reached else 0
    # The in-process run of this point's own mix (streaming_mixes.json, written above).
    mix = point_mixes.get(os.path.basename(f))
    ref_mix = next((items for m, items in mixes if m == mix), 0)
    cpu = float(open(f[:-5] + "_cpu.txt").read())
    # The worker's busy time per second by phase (from its shutdown log), as µs per served batch.
    phases = {}
    try:
        threads_txt = open(f[:-5] + "_threads.txt").read()
        counted = re.search(r"; per batch of \d+: (.*)$", threads_txt, re.M)  # the worker counted its batches
        busy = re.search(r"busy [0-9.]+ = ([^;\n]*)", threads_txt)
        per_batch_items = per_batch or reached  # unknown without timing
        batches_per_s = r["throughput_items_per_s"] / per_batch_items if per_batch_items else 0
        if counted:
            phases = {k: float(v) for k, v in re.findall(r"(\w+) ([0-9.]+) us", counted[1])}
        elif busy and batches_per_s > 0:
            phases = {k: float(v) * 1e6 / batches_per_s for k, v in re.findall(r"(\w+) ([0-9.]+)", busy[1])}
    except OSError:
        pass
    host = {}
    try:
        h = re.search(r"^host: TLB shootdowns (\d+)/s, server minor faults (\d+)/s, worker context switches (\d+)/s voluntary, (\d+)/s involuntary",
                      open(f[:-5] + "_threads.txt").read(), re.M)
        if h:
            host = dict(zip(("tlb_shootdowns_per_s", "minor_faults_per_s", "worker_voluntary_switches_per_s",
                             "worker_involuntary_switches_per_s"), map(int, h.groups())))
    except OSError:
        pass
    rows.append({"transport": m[1], "url": "unix" if m[5] else "tcp", "pinned": bool(m[6]), "concurrency": int(m[2]),
                 "connections": int(m[3]), "delay_us": int(m[4]),
                 "items_per_s": r["throughput_items_per_s"], "e2e_p50_us": r["latency_us"]["e2e"]["p50"],
                 "e2e_p99_us": r["latency_us"]["e2e"]["p99"], "batch_reached": per_batch,
                 "batch_mean_over_responses": reached,
                 "server_cpu_cores": cpu, "errors": r["errors"], "stable": r["stable"],
                 "inprocess_items_per_s": ref, "ratio": r["throughput_items_per_s"] / ref if ref else None,
                 "ratio_at_mean_over_responses": r["throughput_items_per_s"] / ref_per_response if ref_per_response else None,
                 "inprocess_mix_items_per_s": ref_mix, "ratio_to_mix": r["throughput_items_per_s"] / ref_mix if ref_mix else None,
                 "worker_us_per_batch": phases, "host": host,
                 **dict(zip(("inprocess_launch_us", "inprocess_finish_us", "inprocess_gather_us"), calls.get(batch, (0, 0, 0))))})
print(f"{'delay us':>9}{'pin':>5}{'url':>5}{'transport':>10}{'conns':>6}{'items/s':>10}{'p50 us':>9}{'p99 us':>9}{'batch':>7}{'srv cores':>10}"
      f"{'in-proc':>10}{'served/in-proc':>15}{'errors':>7}{'batch/resp':>11}{'ratio there':>12}{'mix in-proc':>12}{'served/mix':>11}")
for x in sorted(rows, key=lambda x: (x["delay_us"], x["pinned"], x["url"], x["connections"], x["transport"] != "unary")):
    print(f"{x['delay_us']:>9}{'yes' if x['pinned'] else 'no':>5}{x['url']:>5}{x['transport']:>10}{x['connections']:>6}{x['items_per_s']:>10.0f}{x['e2e_p50_us']:>9.0f}"
          f"{x['e2e_p99_us']:>9.0f}{x['batch_reached'] or 0:>7.1f}{x['server_cpu_cores']:>10.2f}"
          f"{x['inprocess_items_per_s']:>10.0f}{(x['ratio'] or 0) * 100:>14.1f}%{x['errors']:>7}"
          f"{x['batch_mean_over_responses'] or 0:>11.1f}{(x['ratio_at_mean_over_responses'] or 0) * 100:>11.1f}%"
          f"{x['inprocess_mix_items_per_s']:>12.0f}{(x['ratio_to_mix'] or 0) * 100:>10.1f}%")
print("goal: served >= 85% of in-process at the batch size reached (batch = items per executed batch; batch/resp = the")
print("mean of the batch sizes the responses gave, which counts a batch once per request in it, and the ratio at that size;")
print("mix in-proc = the point's own mix of batch sizes replayed in process, served/mix the ratio to it)")
print("the worker per served batch (us, from its time by phase) against the in-process Launch / Finish calls at that batch")
print("(the served gather + launch is what the in-process Launch call holds; its gather is shown beside it):")
print(f"{'delay us':>9}{'pin':>5}{'url':>5}{'transport':>10}{'conns':>6}{'gather':>8}{'launch':>8}{'finish':>8}{'complete':>9}{'take':>6}"
      f"{'execute':>8}{'in-proc launch':>15}{'of it gather':>13}{'in-proc finish':>15}")
for x in sorted(rows, key=lambda x: (x["delay_us"], x["pinned"], x["url"], x["connections"], x["transport"] != "unary")):
    ph = x["worker_us_per_batch"]
    print(f"{x['delay_us']:>9}{'yes' if x['pinned'] else 'no':>5}{x['url']:>5}{x['transport']:>10}{x['connections']:>6}"
          + "".join(f"{ph.get(k, 0):>{w}.0f}" for k, w in (("gather", 8), ("launch", 8), ("finish", 8), ("complete", 9), ("take", 6), ("execute", 8)))
          + f"{x['inprocess_launch_us']:>15.0f}{x['inprocess_gather_us']:>13.0f}{x['inprocess_finish_us']:>15.0f}")
json.dump(rows, open(f"{out}/streaming_summary.json", "w"), indent=2)
PY
exit $status

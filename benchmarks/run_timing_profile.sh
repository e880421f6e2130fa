#!/bin/bash
# Where request timing's cost goes in process (issue 6's timing on / off ≥ 0.99; BENCHMARKS §36-§37):
# bench_inprocess_throughput (the backend's Launch / Finish back to back, pipelined, the policy net,
# CUDA graphs unless FORWARD=eager) at one batch size under perf, with --request-timing on and off,
# ROUNDS times in turn, each sampled from its header (model loaded, warmed up) to its exit. Then
# every symbol's self time per batch in the benchmark's own thread (which never waits idle: its
# share of that thread's samples x the run's wall time per batch, batch / items/s), on and off
# (medians over the rounds), and the symbols whose time differs most. Needs perf on PATH (the GPU
# machine: benchmarks/stage_perf.sh here, `source benchmarks/perf_env.sh` there).
#
# Usage: benchmarks/run_timing_profile.sh BUILD_DIR OUT_DIR
# Environment: BATCH=8 ITERATIONS=100000 ROUNDS=2 PERF_HZ=4999 FORWARD=graphs MODEL=policy_net TOP=25
# On a CPU-only machine, e.g. FORWARD=eager MODEL=mlp ITERATIONS=2000.
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
batch=${BATCH:-8}
iterations=${ITERATIONS:-100000}
model=${MODEL:-policy_net}
hz=${PERF_HZ:-4999}
command -v perf >/dev/null || { echo "no perf on PATH"; exit 2; }
mkdir -p "$out"
source "$(dirname "$0")/server_lib.sh"
scratch_dir work
"$build/bin/chronoserve-examples" --out "$work/models" >/dev/null || exit 1
[ "${FORWARD:-graphs}" = graphs ] && printf '%s\n' 'optimization { cuda { graphs: true } }' >> "$work/models/$model/config.pbtxt"
status=0
for round in $(seq 1 "${ROUNDS:-2}"); do
  # shellcheck disable=SC2046
  for timing in $(round_order "$round" on off); do
    name="timing_${timing}_r$round"
    "$build/bin/bench_inprocess_throughput" --model-repository "$work/models" -m "$model" --batch-sizes "$batch" \
      -n "$iterations" --request-timing "$timing" --json "$out/$name.json" > "$work/$name.out" 2>&1 &
    bench=$!
    wait_for_header "$work/$name.out" "$bench"
    PERF_HZ=$hz perf_sample "-p $bench" "$work/$name.perf.data"
    wait "$bench" || { status=1; cat "$work/$name.out"; continue; }
    perf report -i "$work/$name.perf.data" --stdio -n --no-children --sort comm,dso,sym -g none 2>/dev/null \
      | grep -v '^#' | grep -v '^$' > "$out/$name.perf.txt"
    echo "== round $round, timing $timing: $(grep -E "^ +$batch " "$work/$name.out" | awk '{print $2}') items/s"
  done
done
python3 - "$out" "${TOP:-25}" <<'PY' || status=1
import collections, glob, json, re, statistics, sys
out, top = sys.argv[1], int(sys.argv[2])
# "  12.34%   5678  bench_inprocess  libcuda.so.1  [.] cuEventRecord": percent, samples, thread, dso, symbol
line = re.compile(r"^\s*([0-9.]+)%\s+(\d+)\s+(\S+)\s+(\S+)\s+\[.\]\s+(.*?)\s*$")
per = {"on": collections.defaultdict(list), "off": collections.defaultdict(list)}
walls = {"on": [], "off": []}
for f in sorted(glob.glob(f"{out}/timing_*_r*.perf.txt")):
    timing = re.search(r"timing_(on|off)_r", f)[1]
    point = json.load(open(f[:-len(".perf.txt")] + ".json"))["points"][0]
    wall_us = point["batch_size"] / point["items_per_s"] * 1e6  # the run's wall time per batch
    samples = collections.Counter()
    for text in open(f):
        m = line.match(text)
        if m and m[3].startswith("bench_inproc"):  # the benchmark's own thread (its name, cut to 15)
            samples[f"{m[4]} {m[5]}"] += int(m[2])
    total = sum(samples.values())
    if total == 0:
        continue
    walls[timing].append(wall_us)
    for sym, n in samples.items():
        per[timing][sym].append(n / total * wall_us)  # µs per batch
runs = {t: len(walls[t]) for t in walls}
if not runs["on"] or not runs["off"]:
    sys.exit("no profile for one of the variants")
med = {t: {s: statistics.median(v + [0] * (runs[t] - len(v))) for s, v in per[t].items()} for t in per}
print(f"the benchmark's thread per batch (wall, median of the rounds): timing on {statistics.median(walls['on']):.1f} us, "
      f"off {statistics.median(walls['off']):.1f} us")
syms = set(med["on"]) | set(med["off"])
rows = sorted(syms, key=lambda s: -abs(med["on"].get(s, 0) - med["off"].get(s, 0)))[:top]
print(f"{'on us':>8}{'off us':>8}{'diff':>8}  symbol (dso sym)")
for s in rows:
    a, b = med["on"].get(s, 0), med["off"].get(s, 0)
    print(f"{a:>8.2f}{b:>8.2f}{a - b:>+8.2f}  {s[:110]}")
by_dso = {t: collections.Counter() for t in med}
for t in med:
    for s, v in med[t].items():
        by_dso[t][s.split(" ", 1)[0]] += v
print("by shared object, us per batch (on / off):")
for d in sorted(set(by_dso["on"]) | set(by_dso["off"]), key=lambda d: -by_dso["on"].get(d, 0))[:10]:
    print(f"   {d:<40} {by_dso['on'].get(d, 0):>7.2f} / {by_dso['off'].get(d, 0):>7.2f}")
PY
exit $status

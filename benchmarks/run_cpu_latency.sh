#!/bin/bash
# Does keeping the host's idle CPUs out of their halt state shorten the transport (issue 6's e2e -
# GPU spans, idle / back to back and first / steady)? run_transport_floor.sh twice on one machine:
# as the machine is, then while a process holds a CPU latency request of 0 us (/dev/cpu_dma_latency,
# the kernel's PM QoS interface: while its file is open, cpuidle picks only states that wake within
# that latency, i.e. idle CPUs poll instead of halting; closing the file withdraws the request).
# The machine's cpuidle driver and states are printed first. Needs root for /dev/cpu_dma_latency.
#
# Usage: benchmarks/run_cpu_latency.sh BUILD_DIR OUT_DIR [PORT]
# Environment: run_transport_floor.sh's (REQUESTS, IDLE_REQUESTS, FIRST_SAMPLES); LATENCY_US=0.
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8062}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
echo "cpuidle driver: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)," \
  "governor: $(cat /sys/devices/system/cpu/cpuidle/current_governor_ro 2>/dev/null || cat /sys/devices/system/cpu/cpuidle/current_governor 2>/dev/null || echo none)," \
  "states of cpu0: $(cat /sys/devices/system/cpu/cpu0/cpuidle/state*/name 2>/dev/null | tr '\n' ' ')"
status=0
echo "== as the machine is"
bash "$here/run_transport_floor.sh" "$build" "$out/default" "$port" | sed -n '/^round trip/,$p' || status=1
echo "== holding a CPU latency request of ${LATENCY_US:-0} us"
python3 -c '
import struct, sys, time
f = open("/dev/cpu_dma_latency", "wb", buffering=0)
f.write(struct.pack("i", int(sys.argv[1])))
print("   request held", flush=True)
time.sleep(3600)' "${LATENCY_US:-0}" &
holder=$!
sleep 1
kill -0 "$holder" 2>/dev/null || { echo "could not hold the request (no /dev/cpu_dma_latency, or not root)"; exit 1; }
bash "$here/run_transport_floor.sh" "$build" "$out/qos" "$port" | sed -n '/^round trip/,$p' || status=1
kill "$holder"
exit $status

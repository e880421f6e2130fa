# Sourced by the benchmark scripts: start chronoserve, wait (bounded) until it is READY, stop it.
# Sets $server to the server's pid.

# start_server BUILD_DIR REPOSITORY LOG PORT [extra chronoserve flags...]
start_server() {
  local build=$1 repo=$2 log=$3 port=$4
  shift 4
  "$build/bin/chronoserve" --model-repository "$repo" --grpc-port "$port" --metrics-port 0 "$@" > "$log" 2>&1 &
  server=$!
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

# cpu_ticks PID: user + system CPU time of a process so far, in clock ticks (getconf CLK_TCK).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

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

# Source on the GPU machine, from the project's root, after benchmarks/stage_perf.sh staged
# .gpu/tools: unpacks the packages into /opt/tools once and installs a `perf` that finds its own
# libraries there (only perf sees them: the server keeps the machine's). jemalloc and tcmalloc are
# then in /opt/tools/usr/lib/x86_64-linux-gnu, where run_allocators.sh looks.
if [ ! -f /opt/tools/.unpacked ]; then
  mkdir -p /opt/tools
  for f in .gpu/tools/*.deb; do dpkg -x "$f" /opt/tools; done
  touch /opt/tools/.unpacked
fi
mkdir -p /opt/tools/bin
printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/tools/usr/lib/x86_64-linux-gnu:/opt/tools/lib/x86_64-linux-gnu exec /opt/tools/usr/bin/perf "$@"\n' \
  > /opt/tools/bin/perf
chmod +x /opt/tools/bin/perf
export PATH=/opt/tools/bin:$PATH
perf --version

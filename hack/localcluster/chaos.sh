#!/usr/bin/env bash
# make chaos-local: the chaos run (e2e/chaos_test.go) on the single-node
# cluster that make e2e-local uses, built from source on this machine (root;
# one cluster per machine: run it under flock /tmp/gpudra-e2e.lock).
#
# Like e2e-local.sh, it brings the cluster up, and takes it down whatever
# happens. In between it mounts a small tmpfs at the plugin's data directory
# (the disk the disk-fill fault fills; nothing else is ever filled), installs
# the chart on the fake backend and runs TestChaos: CHAOS_ITERATIONS
# iterations (default 200) of pods with random claim shapes, SIGKILLs and
# restarts of the plugin, XIDs, a full data disk and deleted CDI specs, with
# the invariants checked after each. Traffic goes only to the local cluster;
# the run stops by itself after CHAOS_TIMEOUT (default 120m).
#
# Environment: CHAOS_ITERATIONS, CHAOS_SEED, CHAOS_TIMEOUT,
# CHAOS_DATA_DIR_SIZE_MIB (default 8), CHAOS_REPORT (JSON figures; default
# $GPUDRA_E2E_LOGS/chaos-report.json), and those of e2e-local.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
t0=$SECONDS
stamp() { echo "[chaos-local $(date +%T)] +$((SECONDS - t0))s $*"; }
iterations=${CHAOS_ITERATIONS:-200}
timeout=${CHAOS_TIMEOUT:-120m}
size=${CHAOS_DATA_DIR_SIZE_MIB:-8}
report=${CHAOS_REPORT:-${GPUDRA_E2E_LOGS:-/tmp/gpudra-e2e-logs}/chaos-report.json}

"$here/deps.sh"
"$here/build.sh" helm k8s etcd containerd
stamp "binaries ready"
source "$here/env.sh"
if [ -e "$STATE/pids" ]; then
  stamp "a previous cluster's state is in $STATE: stopping it"
  "$here/down.sh"
fi
"$here/images.sh"
stamp "images ready"

trap '"$here/down.sh"' EXIT
"$here/up.sh"
stamp "cluster ready"

# The plugin's data disk: small, so that filling it is cheap and touches
# nothing else. down.sh unmounts everything below $STATE.
data="$KUBELET_DIR/plugins/gpu.gpudra.io"
mkdir -p "$data"
mount -t tmpfs -o "size=${size}m,mode=0750" gpudra-chaos-data "$data"
stamp "plugin data directory: tmpfs of $size MiB at $data"

write_chart_values "$STATE/values.yaml"

mkdir -p "$(dirname "$report")"
set +e
(cd "$root" && env "${suite_env[@]}" \
  CHAOS_ITERATIONS=$iterations CHAOS_TIMEOUT=$timeout CHAOS_REPORT=$report \
  go test -tags 'e2e chaos' -count=1 -v -timeout 0 -run '^TestChaos$' ./e2e/)
rc=$?
set -e
stamp "chaos run done (exit $rc); figures in $report"
if [ $rc -ne 0 ]; then
  echo "--- plugin logs (last 80 lines each) ---"
  find "$STATE/pod-logs" -path "*gpudra-e2e-system*" -name '*.log' 2>/dev/null | while read -r f; do echo "== $f"; tail -n 80 "$f"; done
fi
exit $rc

#!/usr/bin/env bash
# make e2e-local: the e2e suite on a single-node cluster built from source and
# run as host processes on this machine (no Docker, no registry, no systemd).
# make e2e-multinode (GPUDRA_LC_NODES=7): the multi-node scenarios
# (e2e/multinode_*_test.go) on a cluster of that many nodes (node.sh; the
# machines GPUDRA_LC_PROFILES names, see env.sh), with Kueue.
#
#  1. Debian packages (deps.sh), then the cluster's binaries, built once and
#     cached by version in $GPUDRA_CACHE (build.sh);
#  2. images as tarballs (images.sh), the cluster (up.sh);
#  3. the suite (go test -tags e2e ./e2e/) with the chart installed on the fake
#     backend, the plugin's host paths under $STATE;
#  4. down.sh, whatever happened: nothing is left running or mounted.
#
# Environment: GPUDRA_CACHE, GPUDRA_E2E_STATE, GPUDRA_E2E_KEEP=1 (leave the
# cluster up after the suite; run down.sh yourself), E2E_RUN (go test -run),
# GPUDRA_E2E_REPORT (timings file), GPUDRA_LC_SCHEDULER_V (kube-scheduler's
# log verbosity).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
t0=$SECONDS
stamp() { echo "[e2e-local $(date +%T)] +$((SECONDS - t0))s $*"; }

"$here/deps.sh"
stamp "packages ready"
source "$here/env.sh"
# The multi-node cluster runs Kueue too.
components=(helm k8s etcd containerd)
[ "$NODES" -gt 1 ] && [ "${GPUDRA_LC_KUEUE:-1}" != 0 ] && components+=(kueue)
"$here/build.sh" "${components[@]}"
stamp "binaries ready"

if [ -e "$STATE/pids" ]; then
  stamp "a previous cluster's state is in $STATE: stopping it"
  "$here/down.sh"
fi
"$here/images.sh"
stamp "images ready"

if [ "${GPUDRA_E2E_KEEP:-}" != 1 ]; then trap '"$here/down.sh"' EXIT; fi
"$here/up.sh"
stamp "cluster ready"

write_chart_values "$STATE/values.yaml"

set +e
if [ "$NODES" -gt 1 ]; then
  # The multi-node scenarios (build tag multinode), on every node.
  # Each node's fake machine is named by the profile file on it.
  (cd "$root" && env "${suite_env[@]}" GPUDRA_E2E_NODES="$NODES" GPUDRA_E2E_PROFILE="$MN_FAKE_PROFILE" \
    go test -tags 'e2e multinode' -count=1 -v -timeout 30m -run "${E2E_RUN:-^TestMultiNode$}" ./e2e/)
else
  (cd "$root" && env "${suite_env[@]}" \
    go test -tags e2e -count=1 -v -timeout 30m ${E2E_RUN:+-run "$E2E_RUN"} ./e2e/)
fi
rc=$?
set -e
stamp "suite done (exit $rc)"
if [ $rc -ne 0 ]; then
  echo "--- plugin logs (last 60 lines each) ---"
  find "$STATE/pod-logs" "$STATE"/nodes/*/pod-logs -path "*gpudra-e2e-system*" -name '*.log' 2>/dev/null | while read -r f; do echo "== $f"; tail -n 60 "$f"; done
  for k in "$STATE/logs/kubelet.log" "$STATE"/nodes/*/logs/kubelet.log; do
    [ -e "$k" ] || continue
    echo "== $k (DRA lines)"; grep -iE "dra|resourceclaim" "$k" | tail -n 40
  done
fi
exit $rc

#!/usr/bin/env bash
# What a large gpudra check costs: PODS pods (default 5000), each with a
# ResourceClaimTemplate of its own whose selector asks for at least 10 to
# 79 Gi of memory, checked on NODES fake DGX H100 nodes (default 2000),
# timed by /usr/bin/time (CPU, wall, peak memory). GPUDRA is the binary
# to time (default: built into a temporary directory from this checkout),
# so that an older build can be timed the same way in the same run.
#
#   hack/check-scale.sh                      # 2000 nodes, 5000 pods
#   NODES=1000 PODS=1000 GPUDRA=/tmp/old/gpudra hack/check-scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${NODES:-2000}
pods=${PODS:-5000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=${GPUDRA:-}
if [[ -z $bin ]]; then
  bin=$work/gpudra
  go build -o "$bin" ./cmd/gpudra
fi
for ((i = 0; i < pods; i++)); do
  cat <<YAML
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: t$i, namespace: ns$((i % 20))}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.gpudra.io
          selectors:
          - cel: {expression: "device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('$((10 + i % 70))Gi')) >= 0"}
---
apiVersion: v1
kind: Pod
metadata: {name: p$i, namespace: ns$((i % 20))}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: t$i}]
  containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]
YAML
done > "$work/objs.yaml"
# /usr/bin/time is Debian's package time. check exits 1 on findings;
# the timing stands either way.
status=0
/usr/bin/time -o "$work/time.txt" -f "nodes=$nodes pods=$pods: %U s CPU (user), %S s system, %e s wall, %M KB peak memory" \
  "$bin" check --profile dgx-h100 --nodes "$nodes" "$work/objs.yaml" > "$work/report.txt" || status=$?
echo "report: $(tail -1 "$work/report.txt") (exit $status)"
cat "$work/time.txt"

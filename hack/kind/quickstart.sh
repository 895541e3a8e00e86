#!/usr/bin/env bash
# gpudra on kind with fake GPUs, for anyone with Docker: a one-node kind
# cluster made as make e2e-kind makes it (cluster.sh), gpudra's image built
# and loaded, the chart on a fake DGX H100 (eight fake H100 GPUs, MIG
# included), and a pod that gets one GPU. The cluster stays for you to try
# the examples in deviceclasses/examples/; remove it with
#   kind delete cluster --name gpudra
#
# Needs Docker (or podman), kind v0.33 (go install sigs.k8s.io/kind@v0.33.0),
# kubectl, Go 1.26 and gcc (the image's binaries are built here), and helm 3
# on PATH (else it is built once into ~/.cache/gpudra, 5-10 minutes).
# KIND_CLUSTER, IMAGE, KIND, KUBECTL and HELM override the defaults.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
CLUSTER=${KIND_CLUSTER:-gpudra}
IMAGE=${IMAGE:-localhost/gpudra:quickstart}
KUBECTL=${KUBECTL:-kubectl}
if [ -z "${HELM:-}" ]; then
  if command -v helm >/dev/null; then
    HELM=helm
  else
    "$root/hack/localcluster/build.sh" helm >&2
    HELM=$("$root/hack/localcluster/build.sh" paths | sed -n 's/.*HELM=//p')
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== kind cluster $CLUSTER, gpudra's image $IMAGE"
source "$here/cluster.sh"
gpudra_kind_up "$CLUSTER" "" "$IMAGE" "$work"
ctx=(--context "kind-$CLUSTER")

echo "== the chart, on fake GPUs"
"$KUBECTL" "${ctx[@]}" create namespace gpudra --dry-run=client -o yaml | "$KUBECTL" "${ctx[@]}" apply -f -
"$KUBECTL" "${ctx[@]}" label namespace gpudra pod-security.kubernetes.io/enforce=privileged --overwrite
# pullPolicy Never: the image is on the node, loaded above, and nowhere else.
"$HELM" upgrade --install gpudra "$root/deployments/helm/gpudra" --kube-context "kind-$CLUSTER" -n gpudra --wait --timeout 5m \
  --set deviceBackend=fake --set kubeletPlugin.runOnControlPlane=true \
  --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" --set image.pullPolicy=Never
"$KUBECTL" "${ctx[@]}" get resourceslices --field-selector spec.driver=gpu.gpudra.io

echo "== a pod with one GPU"
"$KUBECTL" "${ctx[@]}" apply -f - <<'YAML'
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.gpudra.io}
---
apiVersion: v1
kind: Pod
metadata: {name: gpu-test, namespace: default}
spec:
  containers:
  - name: main
    image: busybox:1.37
    command: [sh, -c, 'ls /dev/nvidia*; env | grep ^NVIDIA_; sleep 3600']
    resources: {claims: [{name: gpu}]}
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: one-gpu}
YAML
"$KUBECTL" "${ctx[@]}" wait --for=condition=Ready pod/gpu-test --timeout=3m
"$KUBECTL" "${ctx[@]}" logs gpu-test
"$KUBECTL" "${ctx[@]}" get resourceclaims

cat <<DONE

gpudra runs on kind cluster $CLUSTER (kubectl context kind-$CLUSTER) with a fake DGX H100.
Next: the GPUs and who holds them (make cli && bin/gpudra status), the examples of
deviceclasses/examples/ (MIG partitions, MPS, time-slicing), and docs/README.md.
Remove it all: kind delete cluster --name $CLUSTER
DONE

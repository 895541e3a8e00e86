#!/usr/bin/env bash
# make e2e-kind: the e2e suite on a kind cluster. Needs Docker (or podman),
# kind (go install sigs.k8s.io/kind@v0.33.0) and kindest/node:v1.37.x.
# It creates the cluster from kind-config.yaml, loads the plugin's image and
# a busybox image, runs the same suite as make e2e-local, and deletes the
# cluster (KEEP_CLUSTER=1 keeps it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
KIND=${KIND:-kind}
CLUSTER=${KIND_CLUSTER:-gpudra-e2e}
IMAGE=${IMAGE:-localhost/gpudra:e2e}
BUSYBOX=${BUSYBOX_IMAGE:-docker.io/library/busybox:1.37}
HELM=${HELM:-$("$root/hack/localcluster/build.sh" helm >&2 && "$root/hack/localcluster/build.sh" paths | sed 's/.*HELM=//')}
work=$(mktemp -d)
cleanup() {
  [ "${KEEP_CLUSTER:-}" = 1 ] || "$KIND" delete cluster --name "$CLUSTER" || true
  rm -rf "$work"
}
trap cleanup EXIT

# The cluster and the image as the README's quick start makes them.
source "$here/cluster.sh"
gpudra_kind_up "$CLUSTER" "$work/kubeconfig" "$IMAGE" "$work"
docker pull "$BUSYBOX" >/dev/null && "$KIND" load docker-image "$BUSYBOX" --name "$CLUSTER"

cat >"$work/values.yaml" <<VALUES
image:
  repository: ${IMAGE%:*}
  tag: ${IMAGE##*:}
  pullPolicy: Never
# kind's one node is the control plane, and the GPU node.
kubeletPlugin:
  runOnControlPlane: true
VALUES
cd "$root"
KUBECONFIG=$work/kubeconfig GPUDRA_E2E_HELM=$HELM GPUDRA_E2E_KUBECTL=${KUBECTL:-kubectl} \
  GPUDRA_E2E_VALUES=$work/values.yaml GPUDRA_E2E_TEST_IMAGE=$BUSYBOX GPUDRA_E2E_PULL_POLICY=IfNotPresent \
  GPUDRA_E2E_IMAGE_LOAD=kind KIND_CLUSTER_NAME=$CLUSTER \
  go test -tags e2e -count=1 -v -timeout 30m ${E2E_RUN:+-run "$E2E_RUN"} ./e2e/

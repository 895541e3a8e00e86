#!/usr/bin/env bash
# Sourced by e2e-kind.sh (make e2e-kind) and quickstart.sh: both make their
# kind cluster, and put gpudra's image on it, the same way, so the quick
# start a reader follows is the path the e2e suite runs.
#
#   gpudra_kind_up CLUSTER KUBECONFIG IMAGE WORKDIR
#
# creates the kind cluster CLUSTER from kind-config.yaml (Kubernetes 1.37,
# CDI on in containerd, the node labelled as a GPU node; KIND_NODE_IMAGE
# overrides the node image), writing its kubeconfig to KUBECONFIG (empty:
# kind's default, ~/.kube/config, made the current context), then builds
# gpudra's image as IMAGE with hack/image.sh and loads it into the cluster.
# KIND names the kind binary.

gpudra_kind_up() {
  local cluster=$1 kubeconfig=$2 image=$3 work=$4
  local here root
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  root=$(cd "$here/../.." && pwd)
  command -v "${KIND:-kind}" >/dev/null || {
    echo "kind not found: install it (go install sigs.k8s.io/kind@v0.33.0) or set KIND" >&2
    return 1
  }
  "${KIND:-kind}" create cluster --name "$cluster" --config "$here/kind-config.yaml" \
    ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} ${kubeconfig:+--kubeconfig "$kubeconfig"} --wait 120s
  "${GPUDRA_IMAGE_SH:-$root/hack/image.sh}" "$work/gpudra.tar" "$image"
  "${KIND:-kind}" load image-archive "$work/gpudra.tar" --name "$cluster"
}

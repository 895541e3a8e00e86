#!/usr/bin/env bash
# Builds the kubelet plugin and writes its image as a docker-archive tarball,
# with no Docker daemon and no registry (hack/mkimage):
#
#   hack/image.sh OUT.tar [REPO:TAG]     (default ghcr.io/gpudra/gpudra:dev)
#
# The plugin links go-nvml through cgo, so the image carries the glibc it was
# linked against (from this host, found with ldd). Load the result with
# `ctr -n k8s.io images import`, `docker load` or `kind load image-archive`.
# The Dockerfile builds the same image for users with a container engine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: hack/image.sh OUT.tar [REPO:TAG]}
tag=${2:-ghcr.io/gpudra/gpudra:dev}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
(cd "$root/hack/mkimage" && GOWORK=off CGO_ENABLED=0 go build -o "$work/mkimage" .)
(cd "$root" && CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations \
  go build -ldflags "-s -w" -o "$work/gpudra-kubelet-plugin" ./cmd/kubelet-plugin)
"$work/mkimage" -o "$out" -t "$tag" -ldd \
  -file "$work/gpudra-kubelet-plugin:/usr/bin/gpudra-kubelet-plugin" \
  -entrypoint /usr/bin/gpudra-kubelet-plugin

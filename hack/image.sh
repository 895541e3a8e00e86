#!/usr/bin/env bash
# Builds the kubelet plugin and the controller and writes their image (one
# image, two binaries) as a docker-archive tarball,
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
# One build with one set of flags, so both binaries share the build cache
# (the controller needs no cgo, but building it without would recompile
# every dependency).
(cd "$root" && CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations \
  go build -ldflags "-s -w" -o "$work/" ./cmd/kubelet-plugin ./cmd/controller)
mv "$work/kubelet-plugin" "$work/gpudra-kubelet-plugin"
mv "$work/controller" "$work/gpudra-controller"
# NVIDIA's CDI hook (the toolkit version go.mod pins) runs on the host, whose
# libc is not this one: linked statically. The chart's init container copies
# it to the host (gpudra-kubelet-plugin --install-cdi-hook).
# (The linker's warnings about dlopen in a static binary concern WSL only.)
if ! hookout=$(cd "$root" && CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations \
  go build -tags netgo,osusergo -ldflags '-s -w -extldflags "-static"' -o "$work/nvidia-cdi-hook" \
  github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook 2>&1); then
  echo "$hookout" >&2; exit 1
fi
"$work/mkimage" -o "$out" -t "$tag" -ldd \
  -file "$work/gpudra-kubelet-plugin:/usr/bin/gpudra-kubelet-plugin" \
  -file "$work/nvidia-cdi-hook:/usr/bin/nvidia-cdi-hook" \
  -file "$work/gpudra-controller:/usr/bin/gpudra-controller" \
  -entrypoint /usr/bin/gpudra-kubelet-plugin

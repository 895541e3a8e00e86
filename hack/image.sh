#!/usr/bin/env bash
# Builds the kubelet plugin, the controller and the gpudra CLI and writes
# their image (one image, every binary) as a docker-archive tarball, with no
# Docker daemon and no registry (hack/mkimage):
#
#   hack/image.sh OUT.tar [REPO:TAG]     (default ghcr.io/gpudra/gpudra:<hack/version.sh version>, the chart's default)
#
# The binaries are stamped with hack/version.sh's version and revision
# (VERSION and REVISION override), and so are the image's OCI labels
# (org.opencontainers.image.version, .revision). GPUDRA_IMAGE_BIN_DIR, when
# set, keeps a copy of the binaries there (the e2e suite runs the gpudra CLI
# it put in the image).
#
# IMAGE_ARCH (amd64 or arm64; default this host's) builds the image of that
# architecture: another one than the host's is cross-compiled with Debian's
# cross compiler (CROSS_CC, default aarch64-linux-gnu-gcc for arm64) and
# packs the libraries of its sysroot (CROSS_SYSROOT, default
# /usr/aarch64-linux-gnu): apt-get install gcc-aarch64-linux-gnu
# libc6-dev-arm64-cross. make image-multiarch puts both in one index.
#
# The plugin links go-nvml through cgo, so the image carries the glibc it was
# linked against (from this host, found with ldd, or the cross sysroot's).
# IMAGE_LIBS_SYSROOT packs the libraries from that sysroot instead, for any
# architecture: make release gives it Debian's pinned glibc
# (hack/release/glibc.lock), so the image's glibc is not the build host's;
# mkimage refuses a binary that needs a newer glibc than the one packed.
# GO_BUILD_FLAGS adds go build flags (make release: -trimpath).
# IMAGE_ALSO_TAG names the same image by a second reference in the archive
# (make image: the tag the source chart pulls, its appVersion).
# Load the result with `ctr -n k8s.io images import`, `docker load` or
# `kind load image-archive`.
# The Dockerfile builds the same image for users with a container engine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: hack/image.sh OUT.tar [REPO:TAG]}
version=$("$root/hack/version.sh" version)
revision=$("$root/hack/version.sh" revision)
ldflags=$("$root/hack/version.sh" ldflags)
tag=${2:-ghcr.io/gpudra/gpudra:$version}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
host_arch=$(go env GOARCH)
arch=${IMAGE_ARCH:-$host_arch}
cross=(env) libs=(-ldd)
if [ "$arch" != "$host_arch" ]; then
  case $arch in
    arm64) triplet=aarch64-linux-gnu ;;
    amd64) triplet=x86_64-linux-gnu ;;
    *) echo "image.sh: IMAGE_ARCH=$arch: only amd64 and arm64 are built" >&2; exit 2 ;;
  esac
  cc=${CROSS_CC:-$triplet-gcc}
  sysroot=${CROSS_SYSROOT:-/usr/$triplet}
  if ! command -v "$cc" >/dev/null || [ ! -e "$sysroot/lib/libc.so.6" ]; then
    echo "image.sh: an $arch image needs $cc and the $arch libc in $sysroot (Debian: apt-get install gcc-$triplet libc6-dev-${arch}-cross)" >&2
    exit 2
  fi
  cross=(env GOARCH="$arch" CC="$cc")
  libs=(-arch "$arch" -libs "$sysroot")
fi
if [ -n "${IMAGE_LIBS_SYSROOT:-}" ]; then
  libs=(-arch "$arch" -libs "$IMAGE_LIBS_SYSROOT")
fi
# Word-split on purpose: a list of flags.
# shellcheck disable=SC2206
goflags=(${GO_BUILD_FLAGS:-})
also=()
if [ -n "${IMAGE_ALSO_TAG:-}" ] && [ "$IMAGE_ALSO_TAG" != "$tag" ]; then also=(-also-tag "$IMAGE_ALSO_TAG"); fi
mkdir -p "$(dirname "$out")"  # bin/ on a fresh clone
(cd "$root/hack/mkimage" && GOWORK=off CGO_ENABLED=0 go build -o "$work/mkimage" .)
# One build with one set of flags, so the binaries share the build cache
# (the controller needs no cgo, but building it without would recompile
# every dependency).
(cd "$root" && "${cross[@]}" CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations \
  go build "${goflags[@]}" -ldflags "-s -w $ldflags" -o "$work/" ./cmd/kubelet-plugin ./cmd/controller ./cmd/gpudra)
mv "$work/kubelet-plugin" "$work/gpudra-kubelet-plugin"
mv "$work/controller" "$work/gpudra-controller"
# NVIDIA's CDI hook (the toolkit version go.mod pins) runs on the host, whose
# libc is not this one: linked statically. The chart's init container copies
# it to the host (gpudra-kubelet-plugin --install-cdi-hook).
# (The linker's warnings about dlopen in a static binary concern WSL only.)
if ! hookout=$(cd "$root" && "${cross[@]}" CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations \
  go build "${goflags[@]}" -tags netgo,osusergo -ldflags '-s -w -extldflags "-static"' -o "$work/nvidia-cdi-hook" \
  github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook 2>&1); then
  echo "$hookout" >&2; exit 1
fi
if [ -n "${GPUDRA_IMAGE_BIN_DIR:-}" ]; then
  mkdir -p "$GPUDRA_IMAGE_BIN_DIR"
  cp "$work/gpudra-kubelet-plugin" "$work/gpudra-controller" "$work/gpudra" "$GPUDRA_IMAGE_BIN_DIR/"
  ln -sf gpudra "$GPUDRA_IMAGE_BIN_DIR/kubectl-gpudra"
fi
# The gpudra CLI is there for `kubectl debug node/<node> --image <this image>
# -- gpudra inventory` (README), kubectl-gpudra for `kubectl gpudra`; /tmp
# for the scratch directories the CLI makes.
"$work/mkimage" -o "$out" -t "$tag" "${also[@]}" "${libs[@]}" \
  -file "$work/gpudra-kubelet-plugin:/usr/bin/gpudra-kubelet-plugin" \
  -file "$work/nvidia-cdi-hook:/usr/bin/nvidia-cdi-hook" \
  -file "$work/gpudra-controller:/usr/bin/gpudra-controller" \
  -file "$work/gpudra:/usr/bin/gpudra" \
  -symlink /usr/bin/kubectl-gpudra:gpudra \
  -dir /tmp:1777 \
  -label "org.opencontainers.image.title=gpudra" \
  -label "org.opencontainers.image.description=gpudra, a Kubernetes DRA driver for NVIDIA GPUs: kubelet plugin, controller and CLI" \
  -label "org.opencontainers.image.source=https://github.com/gpudra/gpudra" \
  -label "org.opencontainers.image.version=$version" \
  -label "org.opencontainers.image.revision=$revision" \
  -entrypoint /usr/bin/gpudra-kubelet-plugin

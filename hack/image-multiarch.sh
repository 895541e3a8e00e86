#!/usr/bin/env bash
# Builds the image for linux/amd64 and linux/arm64 (GB200/GB300 trays have
# Grace CPUs) and writes one multi-architecture image: an OCI image layout
# tarball whose index lists both (hack/mkimage index):
#
#   hack/image-multiarch.sh OUT.tar [REPO:TAG]
#
# Each architecture's docker-archive is kept beside OUT as
# OUT-<arch>.tar (what hack/check-arm64.sh runs). Push the index with
# `skopeo copy --all oci-archive:OUT.tar docker://REPO:TAG`, or unpack it
# and `crane push --index DIR REPO:TAG` (crane reads a tarball as a
# docker-archive); `ctr images import OUT.tar` loads it on a node. make
# release builds the same index with a pinned glibc (docs/releasing.md).
# The arm64 build needs Debian's cross compiler, which hack/cross-deps.sh
# installs (as root) when it is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: hack/image-multiarch.sh OUT.tar [REPO:TAG]}
version=$("$root/hack/version.sh" version)
tag=${2:-ghcr.io/gpudra/gpudra:$version}
base=${out%.tar}
"$root/hack/cross-deps.sh"
for arch in amd64 arm64; do
  IMAGE_ARCH=$arch "$root/hack/image.sh" "$base-$arch.tar" "$tag"
done
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
(cd "$root/hack/mkimage" && GOWORK=off CGO_ENABLED=0 go build -o "$work/mkimage" .)
"$work/mkimage" index -o "$out" -t "$tag" "$base-amd64.tar" "$base-arm64.tar"

#!/usr/bin/env bash
# The kubectl plugin of a release for krew (https://krew.sigs.k8s.io):
#
#   hack/krew.sh VERSION DIR
#
# For each gpudra-VERSION-<os>-<arch> CLI binary in DIR (what
# hack/release.sh puts there), writes kubectl-gpudra-VERSION-<os>-<arch>.tar.gz
# (the binary as kubectl-gpudra, and LICENSE), and kubectl-gpudra.krew.yaml:
# the krew plugin manifest naming each archive's release download URL and
# sha256. Submit the manifest to the krew index, or install from it
# directly: kubectl krew install --manifest=kubectl-gpudra.krew.yaml.
# The archives are reproducible: sorted, owned by root, dated
# SOURCE_DATE_EPOCH (default: the commit's time), gzip without a name.
# RELEASE_URL overrides where the archives are downloaded from (default:
# the GitHub release of tag vVERSION).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:?usage: hack/krew.sh VERSION DIR}
dir=${2:?usage: hack/krew.sh VERSION DIR}
version=${version#v}
url=${RELEASE_URL:-https://github.com/gpudra/gpudra/releases/download/v$version}
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct HEAD 2>/dev/null || echo 0)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

platforms=()
for bin in "$dir"/gpudra-"$version"-*-*; do
  [ -f "$bin" ] || continue
  plat=${bin##*/gpudra-"$version"-}
  case $plat in *.*) continue ;; esac # sums, archives: not a binary
  os=${plat%-*} arch=${plat#*-}
  mkdir -p "$work/$plat"
  cp "$bin" "$work/$plat/kubectl-gpudra"
  chmod 0755 "$work/$plat/kubectl-gpudra"
  cp "$root/LICENSE" "$work/$plat/LICENSE"
  archive=kubectl-gpudra-$version-$os-$arch.tar.gz
  (cd "$work/$plat" && tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
    --mode='u=rwX,go=rX' --format=gnu -cf - LICENSE kubectl-gpudra | gzip -n -9 >"$dir/$archive")
  platforms+=("$os $arch $archive $(sha256sum "$dir/$archive" | cut -d' ' -f1)")
done
if [ ${#platforms[@]} -eq 0 ]; then
  echo "hack/krew.sh: no gpudra-$version-<os>-<arch> binary in $dir" >&2
  exit 1
fi

{
  cat <<YAML
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: gpudra
spec:
  version: v$version
  homepage: https://github.com/gpudra/gpudra
  shortDescription: Check, show and migrate NVIDIA GPU claims of gpudra's DRA driver
  description: |
    kubectl gpudra is the command line of gpudra, a Kubernetes Dynamic
    Resource Allocation driver for NVIDIA GPUs. status shows a live
    cluster's GPUs, MIG partitions and shares and the claims and pods that
    hold them; check tells offline or against a cluster what the scheduler
    and the plugin would do with claims, classes and pods; migrate turns
    NVIDIA's DRA driver manifests into gpudra's. The darwin builds have no
    cgo and so no NVML subcommands (inventory, gpu-check, simulate).
  platforms:
YAML
  for p in "${platforms[@]}"; do
    read -r os arch archive sum <<<"$p"
    cat <<YAML
  - selector:
      matchLabels: {os: $os, arch: $arch}
    uri: $url/$archive
    sha256: $sum
    bin: kubectl-gpudra
YAML
  done
} >"$dir/kubectl-gpudra.krew.yaml"

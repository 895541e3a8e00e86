#!/usr/bin/env bash
# Runs the linux/arm64 image's own binaries under user-mode emulation
# (qemu-aarch64), from the image's file system: each binary's --version, and
# `gpudra simulate` on the GB200 tray profile, so that what a Grace (arm64)
# node would run is checked on an amd64 machine, libraries included.
#
#   hack/check-arm64.sh [ARM64-IMAGE.tar]
#
# Without an argument it builds the arm64 image first (IMAGE_ARCH=arm64
# hack/image.sh). Needs qemu-user and, to build, Debian's cross compiler,
# which hack/cross-deps.sh installs (as root) when they are missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/hack/cross-deps.sh"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
image=${1:-}
if [ -z "$image" ]; then
  image=$work/arm64.tar
  IMAGE_ARCH=arm64 "$root/hack/image.sh" "$image" gpudra-arm64-check:local
fi

# The image's file system: a docker-archive holds one layer tarball.
mkdir -p "$work/archive" "$work/rootfs"
tar -xf "$image" -C "$work/archive"
layer=$(cd "$work/archive" && python3 -c 'import json;print(json.load(open("manifest.json"))[0]["Layers"][0])')
tar -xf "$work/archive/$layer" -C "$work/rootfs"
arch=$(cd "$work/archive" && python3 -c 'import json;m=json.load(open("manifest.json"))[0];print(json.load(open(m["Config"]))["architecture"])')
[ "$arch" = arm64 ] || { echo "check-arm64: $image is a $arch image" >&2; exit 1; }

# -L makes the emulator look up the ELF interpreter and libraries inside the
# image, so a library the image lacks fails here as it would on a node.
run() { (cd "$work" && qemu-aarch64 -L "$work/rootfs" "$work/rootfs/usr/bin/$1" "${@:2}"); }
for bin in gpudra-kubelet-plugin gpudra-controller; do
  echo "[check-arm64] $bin --version: $(run "$bin" --version)"
done
echo "[check-arm64] gpudra version: $(run gpudra version | head -1)"
echo "[check-arm64] nvidia-cdi-hook --version: $(run nvidia-cdi-hook --version 2>&1 | head -1)"
# gpudra simulate on the tray profile must print what the host's build
# prints for the same manifests (temporary directories aside): the same
# slices, allocations and CDI specs, on arm64. The MPS examples are left
# out: their control daemon is a child process, which user-mode emulation
# cannot start without binfmt_misc (on a Grace node it runs as on amd64).
profile=${CHECK_ARM64_PROFILE:-gb200-tray}
mkdir -p "$work/manifests/examples"
cp "$root"/deviceclasses/*.yaml "$work/manifests/"
for f in "$root"/deviceclasses/examples/*.yaml; do
  case $(basename "$f") in sharing-mps*) continue ;; esac
  cp "$f" "$work/manifests/examples/"
done
(cd "$root" && go build -o "$work/host-gpudra" ./cmd/gpudra)
simulate() {
  local out rc=0
  out=$("$@" simulate --profile "$profile" --manifests "$work/manifests" 2>&1) || rc=$?
  echo "$out" | sed -E 's#/tmp/gpudra-simulate-[0-9]+#<tmp>#g'
  echo "exit $rc"
}
host_out=$(cd "$work" && simulate "$work/host-gpudra")
arm_out=$(cd "$work" && simulate qemu-aarch64 -L "$work/rootfs" "$work/rootfs/usr/bin/gpudra")
if [ "$host_out" != "$arm_out" ]; then
  diff <(echo "$host_out") <(echo "$arm_out") | head -n 60 >&2
  echo "[check-arm64] gpudra simulate --profile $profile: the arm64 build prints something else than the host's" >&2
  exit 1
fi
echo "$arm_out" | tail -n 3
echo "[check-arm64] gpudra simulate --profile $profile: the arm64 build prints what the host's does ($(echo "$arm_out" | grep -c '^pod ') pods)"

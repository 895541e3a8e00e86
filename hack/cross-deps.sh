#!/usr/bin/env bash
# Installs the Debian packages an arm64 build and its check need, if any is
# missing: the cross compiler and arm64 libc (hack/image.sh with
# IMAGE_ARCH=arm64) and user-mode emulation (hack/check-arm64.sh).
set -euo pipefail
need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
[ -e /usr/aarch64-linux-gnu/lib/libc.so.6 ] || need+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
[ ${#need[@]} -eq 0 ] && exit 0
echo "cross-deps: installing ${need[*]}"
if [ "$(id -u)" -ne 0 ]; then echo "cross-deps: run as root, or install: apt-get install ${need[*]}" >&2; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

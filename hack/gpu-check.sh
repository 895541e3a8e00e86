#!/usr/bin/env bash
# make gpu-check: the read-only check of a machine with NVIDIA GPUs and no
# cluster (gpudra gpu-check --help says what it does). It builds gpudra and
# NVIDIA's nvidia-cdi-hook (so that the CDI spec it writes names one that
# exists), runs the check with a 5-minute limit, and writes one report.
# It changes nothing on the GPUs: NVML is opened through gpudra's read-only
# wrapper, and the only files written are the report and a temporary
# directory it removes.
#
#   make gpu-check                          # report: gpu-check-report.md
#   GPU_CHECK_REPORT=docs/gpu-checks/h100.md make gpu-check
#   GPU_CHECK_ARGS="--driver-root /run/nvidia/driver" make gpu-check
#   hack/gpu-check.sh bundle                # the binaries, xz-compressed, for
#                                           # a GPU machine with no Go
#   GPU_CHECK_BUNDLE=bin/gpu-check-bundle hack/gpu-check.sh   # run from them
#
# Environment: GPU_CHECK_REPORT (the report file), GPU_CHECK_ARGS (more
# gpudra gpu-check flags), GPU_CHECK_FAKE_PROFILE (check fake GPUs of this
# profile instead: how the check itself is tested on machines without a
# GPU), GPU_CHECK_TIMEOUT (seconds, 300), GPUDRA and GPUDRA_CDI_HOOK (use
# these binaries instead of building them), GPU_CHECK_BUNDLE (a folder
# that `hack/gpu-check.sh bundle` wrote: take both binaries from it, so no
# Go is needed), GPU_CHECK_DEVICE_NODE (the device node that says an NVIDIA
# driver is loaded, /dev/nvidiactl).
#
# Without --driver-root in GPU_CHECK_ARGS the driver root is found: "/"
# where libnvidia-ml.so.1 is in a system library folder, else the folder
# above the one ldconfig or nvidia-smi reveal (/usr/local/nvidia on
# machines that mount the driver there, as this workplace's lent GPU
# machines do): NVML and nvcdi look for the driver's files below it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = bundle ]; then
  # The bundle: both binaries stripped (gpudra is about 95 MB, too big to
  # carry to a lent machine) and xz-compressed, with the version stamped
  # as make build stamps it. The GPU machine unpacks them with xz or, where
  # xz is missing, Python's lzma.
  out=${GPU_CHECK_BUNDLE:-$root/bin/gpu-check-bundle}
  mkdir -p "$out"
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
  (cd "$root" && go build -trimpath -ldflags "-s -w $("$root/hack/version.sh" ldflags)" -o "$tmp/gpudra" ./cmd/gpudra)
  # (The static link warns about dlopen, which the hook never needs: the
  # log is shown only when the build fails, as below.)
  (cd "$root" && go build -trimpath -tags netgo,osusergo -ldflags '-s -w -extldflags "-static"' -o "$tmp/nvidia-cdi-hook" \
    github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook 2>"$tmp/hook.log") || { cat "$tmp/hook.log" >&2; exit 1; }
  for b in gpudra nvidia-cdi-hook; do
    xz -T0 -9 -c "$tmp/$b" >"$out/$b.xz.tmp" && mv "$out/$b.xz.tmp" "$out/$b.xz"
  done
  "$tmp/gpudra" version >"$out/VERSION"
  echo "gpu-check bundle in $out ($(du -sh "$out" | cut -f1)): $(cat "$out/VERSION")"
  exit 0
fi
report=${GPU_CHECK_REPORT:-gpu-check-report.md}
fake=${GPU_CHECK_FAKE_PROFILE:-}
timeout_s=${GPU_CHECK_TIMEOUT:-300}
node=${GPU_CHECK_DEVICE_NODE:-/dev/nvidiactl}
t0=$SECONDS
say() { echo "[gpu-check +$((SECONDS - t0))s] $*"; }

if [ -z "$fake" ] && [ ! -e "$node" ]; then
  cat >&2 <<MSG
gpu-check: no NVIDIA GPU on this machine ($node does not exist: no NVIDIA
driver is loaded). Run make gpu-check on a machine with an NVIDIA GPU and its
driver (nvidia-smi works there); nothing was run. To try the check itself on
fake GPUs: GPU_CHECK_FAKE_PROFILE=dgx-h100 make gpu-check
MSG
  exit 3
fi

# driver_root prints where the driver is installed (see above).
driver_root() {
  local d lib=
  for d in /usr/lib64 /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /lib64 /lib/x86_64-linux-gnu /lib/aarch64-linux-gnu /usr/lib; do
    [ -e "$d/libnvidia-ml.so.1" ] && { echo /; return; }
  done
  lib=$(ldconfig -p 2>/dev/null | sed -n 's/.*libnvidia-ml\.so\.1 .*=> //p' | head -n1)
  if [ -z "$lib" ] && command -v nvidia-smi >/dev/null; then
    d=$(dirname "$(dirname "$(readlink -f "$(command -v nvidia-smi)")")")
    for lib in "$d"/lib64/libnvidia-ml.so.1 "$d"/lib/libnvidia-ml.so.1 ""; do [ -e "$lib" ] && break; done
  fi
  [ -z "$lib" ] && [ -e /usr/local/nvidia/lib64/libnvidia-ml.so.1 ] && lib=/usr/local/nvidia/lib64/libnvidia-ml.so.1
  if [ -n "$lib" ]; then dirname "$(dirname "$(readlink -f "$lib")")"; else echo /; fi
}

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
gpudra=${GPUDRA:-}
hook=${GPUDRA_CDI_HOOK:-}
if [ -n "${GPU_CHECK_BUNDLE:-}" ]; then
  for b in gpudra nvidia-cdi-hook; do
    if command -v xz >/dev/null; then
      xz -dc "$GPU_CHECK_BUNDLE/$b.xz" >"$work/$b"
    else
      python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$GPU_CHECK_BUNDLE/$b.xz" "$work/$b"
    fi
    chmod +x "$work/$b"
  done
  gpudra=${gpudra:-$work/gpudra} hook=${hook:-$work/nvidia-cdi-hook}
  say "unpacked $("$gpudra" version) from $GPU_CHECK_BUNDLE"
fi
if [ -z "$gpudra" ]; then
  (cd "$root" && go build -ldflags "$("$root/hack/version.sh" ldflags)" -o "$work/gpudra" ./cmd/gpudra)
  gpudra=$work/gpudra
  say "built gpudra $("$gpudra" version)"
fi
if [ -z "$hook" ]; then
  # The toolkit version go.mod pins, as the image ships it.
  (cd "$root" && go build -tags netgo,osusergo -ldflags '-s -w -extldflags "-static"' -o "$work/nvidia-cdi-hook" \
    github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook 2>"$work/hook.log") || { cat "$work/hook.log" >&2; exit 1; }
  hook=$work/nvidia-cdi-hook
  say "built nvidia-cdi-hook"
fi

args=(gpu-check --report "$report" --nvidia-cdi-hook-path "$hook")
[ -n "$fake" ] && args+=(--device-backend fake --fake-profile "$fake")
if [ -z "$fake" ] && [[ " ${GPU_CHECK_ARGS:-} " != *" --driver-root"* ]]; then
  args+=(--driver-root "$(driver_root)")
fi
# shellcheck disable=SC2206 # GPU_CHECK_ARGS is a list of flags
args+=(${GPU_CHECK_ARGS:-})
set +e
timeout "$timeout_s" "$gpudra" "${args[@]}"
rc=$?
set -e
case $rc in
  124) say "gpu-check did not finish within ${timeout_s}s"; exit 1 ;;
  0) say "passed; report: $report" ;;
  *) say "exit status $rc; report: $report" ;;
esac
exit $rc

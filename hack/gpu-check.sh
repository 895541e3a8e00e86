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
#
# Environment: GPU_CHECK_REPORT (the report file), GPU_CHECK_ARGS (more
# gpudra gpu-check flags), GPU_CHECK_FAKE_PROFILE (check fake GPUs of this
# profile instead: how the check itself is tested on machines without a
# GPU), GPU_CHECK_TIMEOUT (seconds, 300), GPUDRA and GPUDRA_CDI_HOOK (use
# these binaries instead of building them), GPU_CHECK_DEVICE_NODE (the
# device node that says an NVIDIA driver is loaded, /dev/nvidiactl).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
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

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
gpudra=${GPUDRA:-}
if [ -z "$gpudra" ]; then
  (cd "$root" && go build -ldflags "$("$root/hack/version.sh" ldflags)" -o "$work/gpudra" ./cmd/gpudra)
  gpudra=$work/gpudra
  say "built gpudra $("$gpudra" version)"
fi
hook=${GPUDRA_CDI_HOOK:-}
if [ -z "$hook" ]; then
  # The toolkit version go.mod pins, as the image ships it.
  (cd "$root" && go build -tags netgo,osusergo -ldflags '-s -w -extldflags "-static"' -o "$work/nvidia-cdi-hook" \
    github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook 2>"$work/hook.log") || { cat "$work/hook.log" >&2; exit 1; }
  hook=$work/nvidia-cdi-hook
  say "built nvidia-cdi-hook"
fi

args=(gpu-check --report "$report" --nvidia-cdi-hook-path "$hook")
[ -n "$fake" ] && args+=(--device-backend fake --fake-profile "$fake")
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

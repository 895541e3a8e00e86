#!/usr/bin/env bash
# make bench-fleet: the real kube-scheduler on fleets of fake GPU nodes, for
# gpudra's ResourceSlice layout and two others published the same way
# (hack/fleetbench). For every fleet size and layout, back to back in one
# run, it starts a fresh control plane (etcd, kube-apiserver, kube-scheduler:
# no controller manager, no kubelet), runs `fleetbench run`, and stops it;
# then `fleetbench report` writes the page and its charts.
#
#  1. binaries: Kubernetes and etcd from hack/localcluster/build.sh, built
#     once into $GPUDRA_CACHE (shared with make e2e-local);
#  2. the control plane reuses hack/localcluster (env.sh, pki.sh,
#     controlplane.sh) with its own state directory, address (127.0.0.1)
#     and ports (+100), so it can run beside a kept e2e cluster; it takes
#     /tmp/gpudra-e2e.lock like make e2e-local, so that the two never
#     compete for the CPU (do not wrap it in flock yourself);
#  3. the results (JSON, logs) go to $BENCH_FLEET_OUT (default
#     ./bench-fleet); the full run writes docs/measurements/fleet.md and
#     docs/img/fleet-*.svg, the quick one $BENCH_FLEET_OUT/performance.md.
#
# Environment:
#   BENCH_FLEET_MODE=full|quick  full: 100, 500, 1000 and 2000 nodes, at
#                                most 40 pods and 2 minutes per workload, a
#                                minute of churn (about 100 minutes on 2
#                                cores: run it in pieces with
#                                BENCH_FLEET_NODES and BENCH_FLEET_APPEND);
#                                quick: 100 nodes, 20 pods, 30 s of churn
#                                (about 15 minutes);
#                                gb200: 1008 gb200-tray nodes (56 NVL72 racks,
#                                each an NVLink domain with its channel pool),
#                                the 16-tray gang jobs with and without their
#                                NVLink channel claim only (gang16-channel,
#                                gang16-no-channel), at most 448 pods (28
#                                jobs) and 5 minutes per workload, results in
#                                $BENCH_FLEET_OUT/performance.md
#   BENCH_FLEET_CHANNELS         gb200 mode: the exclusive channels per
#                                domain's pool, one run per value, space
#                                separated (default 127, gpudra-controller's
#                                --nvlink-channels default)
#   BENCH_FLEET_NODES, BENCH_FLEET_LAYOUTS, BENCH_FLEET_MAX_PODS,
#   BENCH_FLEET_CELL_TIMEOUT, BENCH_FLEET_CHURN
#                                override the mode's sizes, layouts
#                                (gpudra whole-gpus nvidia-shaped), pods per
#                                workload, time per workload, churn time
#   BENCH_FLEET_ONLY             the cells to run, as workload/state, comma
#                                separated (e.g. gpu1/empty; default: all)
#   BENCH_FLEET_BIG_LAYOUTS      the layouts run above 1000 nodes (default
#                                gpudra whole-gpus: every placement of 16,000
#                                GPUs would hold over 15 GiB in the API
#                                server)
#   BENCH_FLEET_LEVERS           layouts run at BENCH_FLEET_LEVER_NODES
#                                (1000) only, to measure a lever on gpudra's
#                                side (default gpudra-partition-pool
#                                gpudra-node-spares gpudra-all-spares
#                                gpudra-3-profiles; empty: none;
#                                gpudra-partition-pool is the default
#                                layout on a pool whose recent claims are
#                                partitions, where the controller keeps a
#                                spare on every node; gpudra-node-spares is
#                                --mig-spare-gpus=1; also
#                                gpudra-every-counter-set: every GPU's
#                                counter set, the layout before they
#                                followed the published placements)
#   BENCH_FLEET_APPEND=1         keep the runs of earlier pieces in
#                                $BENCH_FLEET_OUT/runs: the report covers them
#                                all
#   BENCH_FLEET_DOCS=1           write docs/measurements/fleet.md and docs/img even
#                                with the overrides above (the last piece of
#                                a full run)
#   BENCH_FLEET_OUT, GPUDRA_CACHE, GPUDRA_BENCH_STATE (default
#   /var/lib/gpudra-bench-fleet)
#   BENCH_FLEET_LOCK=0           do not take the lock (to debug the
#                                benchmark beside an e2e run)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lc=$root/hack/localcluster

mode=${BENCH_FLEET_MODE:-full}
case $mode in
  full) sizes="100 500 1000 2000" max_pods=40 cell_timeout=120s churn=60s ;;
  quick) sizes="100" max_pods=20 cell_timeout=60s churn=30s ;;
  gb200) sizes="1008" max_pods=448 cell_timeout=300s churn=0s ;;
  *) echo "bench-fleet: BENCH_FLEET_MODE must be full, quick or gb200" >&2; exit 2 ;;
esac
profile=dgx-h100 channels_list=127
if [ "$mode" = gb200 ]; then
  # gpudra's layout only; the levers are channel counts.
  profile=gb200-tray channels_list=${BENCH_FLEET_CHANNELS:-127}
  BENCH_FLEET_LAYOUTS=${BENCH_FLEET_LAYOUTS:-gpudra} BENCH_FLEET_LEVERS=${BENCH_FLEET_LEVERS-}
fi
sizes=${BENCH_FLEET_NODES:-$sizes}
layouts=${BENCH_FLEET_LAYOUTS:-gpudra whole-gpus nvidia-shaped}
big_layouts=${BENCH_FLEET_BIG_LAYOUTS:-gpudra whole-gpus}
levers=${BENCH_FLEET_LEVERS-gpudra-partition-pool gpudra-node-spares gpudra-all-spares gpudra-3-profiles}
lever_nodes=${BENCH_FLEET_LEVER_NODES:-1000}
max_pods=${BENCH_FLEET_MAX_PODS:-$max_pods}
cell_timeout=${BENCH_FLEET_CELL_TIMEOUT:-$cell_timeout}
churn=${BENCH_FLEET_CHURN:-$churn}
out=$(mkdir -p "${BENCH_FLEET_OUT:-$root/bench-fleet}" && cd "${BENCH_FLEET_OUT:-$root/bench-fleet}" && pwd)

# A control plane of its own beside the e2e cluster's.
export GPUDRA_E2E_STATE=${GPUDRA_BENCH_STATE:-/var/lib/gpudra-bench-fleet}
export GPUDRA_LC_NODE_IP=127.0.0.1
export GPUDRA_LC_PORT_OFFSET=100
[ "$(id -u)" -eq 0 ] || { echo "bench-fleet: must run as root (like make e2e-local)" >&2; exit 1; }
for tool in openssl curl; do
  command -v $tool >/dev/null || { echo "bench-fleet: needs $tool (apt-get install $tool)" >&2; exit 1; }
done

exec 9>/tmp/gpudra-e2e.lock
if [ "${BENCH_FLEET_LOCK:-1}" = 0 ]; then
  echo "bench-fleet: BENCH_FLEET_LOCK=0: not taking the lock (to debug the benchmark; its figures mean little)"
elif ! flock -n 9; then
  echo "bench-fleet: waiting for /tmp/gpudra-e2e.lock (make e2e-local or another benchmark is running)"
  flock 9
fi

"$lc/build.sh" k8s etcd
source "$lc/env.sh"
source "$lc/controlplane.sh"
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
(cd "$root" && go build -o "$out/fleetbench" ./hack/fleetbench)
k8s_version=$(kube-apiserver --version | awk '{print $2}')

stop_control_plane() {
  lc_stop kube-scheduler
  lc_stop kube-apiserver
  lc_stop etcd
}
cleanup() {
  stop_control_plane
  rm -rf "$STATE"
}
trap cleanup EXIT
cleanup

if [ "${BENCH_FLEET_APPEND:-0}" != 1 ]; then rm -rf "$out/runs"; fi
rm -rf "$out/logs"
mkdir -p "$out/runs" "$out/logs"
# Every fleet size with every layout, back to back (above 1000 nodes only
# the big layouts); the levers at their size, right after it.
runs=() failed=()
largest=0
for n in $sizes; do if [ "$n" -gt "$largest" ]; then largest=$n; fi; done
for n in $sizes; do
  these=$layouts
  if [ "$n" -gt 1000 ]; then
    these=""
    for layout in $layouts; do
      case " $big_layouts " in *" $layout "*) these="$these $layout" ;; esac
    done
  fi
  for layout in $these; do
    for channels in $channels_list; do runs+=("$n $layout $channels"); done
  done
  if [ "$n" -eq "$lever_nodes" ] || { [ "$n" -eq "$largest" ] && [ "$largest" -lt "$lever_nodes" ]; }; then
    for layout in $levers; do runs+=("$n $layout 127"); done
  fi
done
log "bench-fleet ($mode): nodes [$sizes], layouts [$layouts] ([$big_layouts] above 1000 nodes), levers [$levers], at most $max_pods pods and $cell_timeout per workload, $churn of churn; $(uptime)"
for spec in "${runs[@]}"; do
  read -r n layout channels <<<"$spec"
  run=$n-$layout
  [ "$mode" != gb200 ] || run=$n-$layout-$channels-channels
  # Everything but the PKI is fresh for every run.
  stop_control_plane
  find "$STATE" -mindepth 1 -maxdepth 1 ! -name pki -exec rm -rf {} + 2>/dev/null || true
  mkdir -p "$STATE"/{pki,logs,pids,etcd}
  "$lc/pki.sh"
  start_etcd
  wait_etcd
  # On 127.0.0.1, which the kubernetes Service's endpoint reconciler
  # refuses; nothing here uses that Service.
  start_apiserver --endpoint-reconciler-type none
  wait_apiserver
  log "run $run: $(uptime)"
  set +e
  # The fleet first, then the scheduler: publishing thousands of slices
  # is not what is measured.
  "$out/fleetbench" setup --kubeconfig "$KUBECONFIG_ADMIN" --nodes "$n" --layout "$layout" --profile "$profile" --nvlink-channels "$channels" \
    --apiserver-pid "$(cat "$STATE/pids/kube-apiserver.pid")" --out "$out/runs/$run.json" 2>&1 | tee "$out/logs/$run.log"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then log "setup of $run failed; logs in $out/logs"; failed+=("$run"); continue; fi
  cat >"$STATE/scheduler.yaml" <<CONFIG
# The default scheduler, with a client rate limit high enough not to be
# what the benchmark measures (the default, 50 QPS, caps binding).
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $STATE/pki/admin.kubeconfig
  qps: 1000
  burst: 2000
leaderElection:
  leaderElect: false
CONFIG
  start_scheduler --config "$STATE/scheduler.yaml"
  lc_wait_for "kube-scheduler ready" 120 curl -skf "https://127.0.0.1:$SCHED_PORT/healthz"
  set +e
  "$out/fleetbench" run --kubeconfig "$KUBECONFIG_ADMIN" --nodes "$n" --layout "$layout" --profile "$profile" \
    --max-pods "$max_pods" --cell-timeout "$cell_timeout" --churn-duration "$churn" ${BENCH_FLEET_ONLY:+--only "$BENCH_FLEET_ONLY"} \
    --scheduler-metrics "https://127.0.0.1:$SCHED_PORT/metrics" \
    --apiserver-pid "$(cat "$STATE/pids/kube-apiserver.pid")" --scheduler-pid "$(cat "$STATE/pids/kube-scheduler.pid")" \
    --out "$out/runs/$run.json" 2>&1 | tee -a "$out/logs/$run.log"
  rc=${PIPESTATUS[0]}
  set -e
  mkdir -p "$out/logs/$run"
  cp "$STATE"/logs/*.log "$out/logs/$run/" 2>/dev/null || true
  log "run $run done (exit $rc): $(uptime)"
  if [ "$rc" -ne 0 ]; then log "run $run failed; logs in $out/logs"; failed+=("$run"); fi
done
stop_control_plane

md=$out/performance.md img=$out/img
if [ "${BENCH_FLEET_DOCS:-0}" = 1 ] || { [ "$mode" = full ] && [ -z "${BENCH_FLEET_NODES:-}${BENCH_FLEET_LAYOUTS:-}${BENCH_FLEET_MAX_PODS:-}" ]; }; then
  md=$root/docs/measurements/fleet.md img=$root/docs/img
fi
command="make bench-fleet"
[ "$mode" = full ] || command="BENCH_FLEET_MODE=$mode make bench-fleet"
command=${BENCH_FLEET_COMMAND:-$command}
"$out/fleetbench" report --in "$out/runs" --md "$md" --img "$img" --command "$command" --kubernetes "$k8s_version"
log "report: $md ($(uptime))"
if [ ${#failed[@]} -gt 0 ]; then log "failed runs (not in the report): ${failed[*]}"; exit 1; fi

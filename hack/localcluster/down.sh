#!/usr/bin/env bash
# Stops the local cluster that up.sh started and removes what it left on the
# host: pods (through the kubelet, so CNI and DRA clean up after them), every
# process by its PID file, containerd's shims, mounts under $STATE, the pod
# cgroups, the bridge, the node IP on lo, the iptables chains of the kubelet, kube-proxy
# and CNI, and ip_forward. The logs are kept in $LOGS_OUT
# (default /tmp/gpudra-e2e-logs); $STATE is deleted. Safe to run twice.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
LOGS_OUT=${GPUDRA_E2E_LOGS:-/tmp/gpudra-e2e-logs}
[ -d "$STATE" ] || exit 0
K="kubectl --kubeconfig $KUBECONFIG_ADMIN --request-timeout=5s"
running() { [ -e "$STATE/pids/$1.pid" ] && kill -0 "$(cat "$STATE/pids/$1.pid")" 2>/dev/null; }

source "$here/controlplane.sh"

ctrk() { ctr -a "$CONTAINERD_SOCK" -n k8s.io "$@"; }

# The multi-node cluster (up-nodes.sh): the pods first, through their
# kubelets, then Kueue, each node (node.sh down ends all of a node's
# processes), the control plane and the host's network state.
if [ -e "$STATE/nodes/count" ]; then
  nodes=$(cat "$STATE/nodes/count")
  if running kube-apiserver; then
    log "down: deleting workloads and pods"
    $K delete daemonsets,deployments,replicasets,jobs --all -A --wait=false >/dev/null 2>&1
    $K delete pods --all -A --grace-period=1 --wait=false >/dev/null 2>&1
    for _ in $(seq 60); do
      left=0
      for i in $(seq 1 "$nodes"); do
        sock=$(mn_node_dir "$i")/run/containerd/containerd.sock
        [ -S "$sock" ] && [ -n "$(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null)" ] && left=1
      done
      [ $left = 0 ] && break
      sleep 0.5
    done
  fi
  lc_stop kueue
  for i in $(seq 1 "$nodes"); do "$here/node.sh" down "$i"; done
  lc_stop kube-scheduler
  lc_stop kube-controller-manager
  lc_stop kube-apiserver
  lc_stop etcd
  ip link del "$MN_BRIDGE" 2>/dev/null
  ip route del unreachable "$SERVICE_CIDR" 2>/dev/null
  ip route del unreachable "$MN_POD_RANGE" 2>/dev/null
  [ -e "$STATE/ip_forward.before" ] && cat "$STATE/ip_forward.before" >/proc/sys/net/ipv4/ip_forward
  [ -e "$STATE/made-kubelet-dir" ] && rmdir "$MN_KUBELET_DIR" 2>/dev/null
  rm -rf "$LOGS_OUT"; mkdir -p "$LOGS_OUT"
  cp -r "$STATE/logs/." "$LOGS_OUT/" 2>/dev/null
  for i in $(seq 1 "$nodes"); do
    d=$(mn_node_dir "$i")
    mkdir -p "$LOGS_OUT/$(mn_node_name "$i")"
    cp -r "$d/logs/." "$LOGS_OUT/$(mn_node_name "$i")/" 2>/dev/null
    [ -d "$d/pod-logs" ] && cp -r "$d/pod-logs" "$LOGS_OUT/$(mn_node_name "$i")/pods" 2>/dev/null
  done
  findmnt -rn -o TARGET | grep -F "$STATE" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  rm -rf "$STATE"
  [ -d "$STATE" ] && log "down: WARNING: could not remove $STATE"
  log "down: $nodes-node cluster stopped, host cleaned; logs in $LOGS_OUT"
  exit 0
fi

# 1. Let the kubelet stop the pods while everything still runs.
if running kube-apiserver && running kubelet; then
  log "down: deleting workloads and pods"
  $K delete daemonsets,deployments,replicasets,jobs --all -A --wait=false >/dev/null 2>&1
  $K delete pods --all -A --grace-period=1 --wait=false >/dev/null 2>&1
  for _ in $(seq 60); do
    [ -z "$(ctrk tasks ls -q 2>/dev/null)" ] && break
    sleep 0.5
  done
fi

# 2. Node and control plane.
lc_stop kube-proxy
kube-proxy --cleanup >/dev/null 2>&1
lc_stop kubelet
lc_stop kube-scheduler
lc_stop kube-controller-manager
lc_stop kube-apiserver

# 3. Whatever containers are left, then containerd and its idle shims.
if running containerd; then
  for t in $(ctrk tasks ls -q 2>/dev/null); do ctrk tasks kill -s KILL "$t" >/dev/null 2>&1; done
  sleep 0.5
  for t in $(ctrk tasks ls -q 2>/dev/null); do ctrk tasks rm -f "$t" >/dev/null 2>&1; done
  for c in $(ctrk containers ls -q 2>/dev/null); do ctrk containers rm "$c" >/dev/null 2>&1; done
fi
lc_stop containerd
for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" 2>/dev/null); do
  kill -KILL "$pid" 2>/dev/null
done
# Container processes whose shim is gone: anything still in our cgroups.
for h in /sys/fs/cgroup/*/; do
  d="$h${CGROUP_ROOT#/}"
  [ -d "$d" ] || continue
  find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r pid; do kill -KILL "$pid" 2>/dev/null; done
done
lc_stop etcd

# 4. Mounts (network namespaces, pod volumes, rootfs) below $STATE.
findmnt -rn -o TARGET | grep -F "$STATE" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
findmnt -rn -o TARGET | grep -F "$KUBELET_DIR" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done

# 5. Pod cgroups, deepest first (a cgroup goes once its processes have).
sleep 0.5
for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/unified/; do
  d="${h%/}${CGROUP_ROOT}"
  [ -d "$d" ] || continue
  for _ in 1 2 3 4 5; do
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    [ -d "$d" ] || break
    sleep 0.5
  done
  [ -d "$d" ] && log "down: WARNING: cgroup $d remains"
done

# 6. Network.
ip link del "$BRIDGE" 2>/dev/null
ip addr del "$NODE_IP/32" dev lo 2>/dev/null
# The kubelet's, kube-proxy's and the bridge plugin's chains and every rule
# that jumps to them; other rules stay as they are.
for ipt in iptables ip6tables; do
  for table in filter nat mangle raw; do
    rules=$($ipt-save -t $table 2>/dev/null) || continue
    grep -qE 'KUBE-|CNI-' <<<"$rules" || continue
    grep -vE '^:(KUBE-|CNI-)|^-A (KUBE-|CNI-)|-j (KUBE-|CNI-)' <<<"$rules" | $ipt-restore -T $table
  done
done
[ -e "$STATE/ip_forward.before" ] && cat "$STATE/ip_forward.before" >/proc/sys/net/ipv4/ip_forward

# The links the e2e suite's README install scenario makes to this cluster's
# node directories (e2e/readme_test.go), if an interrupted run left them.
for l in /var/lib/kubelet/plugins /var/lib/kubelet/plugins_registry /var/run/cdi; do
  [ -L "$l" ] && case $(readlink "$l") in "$STATE"/*) rm -f "$l" ;; esac
done

# 7. Keep the logs, drop the rest.
rm -rf "$LOGS_OUT"; mkdir -p "$LOGS_OUT"
cp -r "$STATE/logs/." "$LOGS_OUT/" 2>/dev/null
[ -d "$STATE/pod-logs" ] && cp -r "$STATE/pod-logs" "$LOGS_OUT/pods" 2>/dev/null
rm -rf "$STATE"
[ -d "$STATE" ] && log "down: WARNING: could not remove $STATE"
log "down: cluster stopped, host cleaned; logs in $LOGS_OUT"
exit 0

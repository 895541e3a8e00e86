#!/usr/bin/env bash
# Starts a single-node Kubernetes cluster as background processes: etcd,
# containerd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubelet, kube-proxy, with the binaries build.sh made and the state in
# $STATE. Prints the admin kubeconfig's path. down.sh stops it.
# With GPUDRA_LC_NODES > 1 it starts the multi-node cluster instead
# (up-nodes.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
[ "$(id -u)" -eq 0 ] || { echo "up.sh: must run as root" >&2; exit 1; }
if [ -e "$STATE/pids" ] && ls "$STATE"/pids/*.pid >/dev/null 2>&1; then
  echo "up.sh: $STATE holds a running cluster; run down.sh first" >&2; exit 1
fi
source "$here/controlplane.sh"
if [ "$NODES" -gt 1 ]; then
  exec "$here/up-nodes.sh"
fi
mkdir -p "$STATE"/{pki,logs,pids,etcd,containerd,run/containerd,run/cdi,run/runc,cni/net.d,cni/ipam,kubelet,images,pod-logs}
mkdir -p "$FAKE_STATE_DIR"

# Host state to restore on down.sh.
[ -e "$STATE/ip_forward.before" ] || cat /proc/sys/net/ipv4/ip_forward >"$STATE/ip_forward.before"
ip addr show dev lo | grep -q " $NODE_IP/" || ip addr add "$NODE_IP/32" dev lo

"$here/pki.sh"
log "[$(lc_since)s] pki ready"

start_etcd

# containerd v2 (CDI on by default). This VM lacks CAP_SYS_RESOURCE, so the
# oom_score_adj the kubelet asks for must be clamped, or runc fails.
sed -e "s|@STATE@|$STATE|g" -e "s|@CDI_DIR@|$CDI_DIR|g" -e "s|@PAUSE_IMAGE@|$PAUSE_IMAGE|g" \
  "$here/config/containerd.toml" >"$STATE/containerd.toml"
sed -e "s|@STATE@|$STATE|g" -e "s|@BRIDGE@|$BRIDGE|g" -e "s|@POD_CIDR@|$POD_CIDR|g" \
  "$here/config/10-bridge.conflist" >"$STATE/cni/net.d/10-bridge.conflist"
lc_start containerd containerd --config "$STATE/containerd.toml"
wait_etcd
lc_wait_for "containerd ready" 60 ctr -a "$CONTAINERD_SOCK" version

for img in "$STATE"/images/*.tar; do
  [ -e "$img" ] || continue
  ctr -a "$CONTAINERD_SOCK" -n k8s.io images import --all-platforms "$img" >/dev/null
done
log "[$(lc_since)s] images imported: $(ls "$STATE"/images/ | tr '\n' ' ')"

start_apiserver
wait_apiserver
start_controller_manager
start_scheduler

# The kubelet puts pods under its own cgroup root in every hierarchy.
lc_cgroup_root "$CGROUP_ROOT"
sed -e "s|@STATE@|$STATE|g" -e "s|@POD_CIDR@|$POD_CIDR|g" -e "s|@CGROUP_ROOT@|$CGROUP_ROOT|g" \
  -e "s|@KUBELET_PORT@|$KUBELET_PORT|g" -e "s|@KUBELET_HEALTHZ_PORT@|$KUBELET_HEALTHZ_PORT|g" \
  -e "s|@CONTAINERD_SOCK@|$CONTAINERD_SOCK|g" \
  "$here/config/kubelet.yaml" >"$STATE/kubelet.yaml"
# The node's (fake) GPUs: the label NVIDIA's GPU Feature Discovery puts on
# GPU nodes, which the chart's default node affinity asks for.
lc_start kubelet kubelet --config "$STATE/kubelet.yaml" --kubeconfig "$STATE/pki/kubelet.kubeconfig" \
  --root-dir "$KUBELET_DIR" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" -v 2 \
  --node-labels nvidia.com/gpu.present=true
lc_start kube-proxy kube-proxy --kubeconfig "$STATE/pki/admin.kubeconfig" --proxy-mode iptables \
  --cluster-cidr "$POD_CIDR" --hostname-override "$NODE_NAME" --conntrack-max-per-core 0 \
  --metrics-bind-address "127.0.0.1:$PROXY_METRICS_PORT" --healthz-bind-address "127.0.0.1:$PROXY_HEALTHZ_PORT"

K="kubectl --kubeconfig $KUBECONFIG_ADMIN"
lc_wait_for "node registered" 120 $K get node "$NODE_NAME"
lc_wait_for "node Ready" 120 $K wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
lc_wait_for "default ServiceAccount (cluster ready)" 120 $K -n default get serviceaccount default
echo "$KUBECONFIG_ADMIN"

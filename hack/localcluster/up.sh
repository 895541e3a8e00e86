#!/usr/bin/env bash
# Starts a single-node Kubernetes cluster as background processes: etcd,
# containerd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubelet, kube-proxy, with the binaries build.sh made and the state in
# $STATE. Prints the admin kubeconfig's path. down.sh stops it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
[ "$(id -u)" -eq 0 ] || { echo "up.sh: must run as root" >&2; exit 1; }
if [ -e "$STATE/pids" ] && ls "$STATE"/pids/*.pid >/dev/null 2>&1; then
  echo "up.sh: $STATE holds a running cluster; run down.sh first" >&2; exit 1
fi
t0=$(date +%s%N)
since() { local ms=$((($(date +%s%N) - t0) / 1000000)); printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); }
mkdir -p "$STATE"/{pki,logs,pids,etcd,containerd,run/containerd,run/cdi,run/runc,cni/net.d,cni/ipam,kubelet,images,pod-logs}
mkdir -p "$FAKE_STATE_DIR"

# Host state to restore on down.sh.
[ -e "$STATE/ip_forward.before" ] || cat /proc/sys/net/ipv4/ip_forward >"$STATE/ip_forward.before"
ip addr show dev lo | grep -q " $NODE_IP/" || ip addr add "$NODE_IP/32" dev lo

# start NAME CMD...: background process with a PID file and a log.
start() {
  local name=$1; shift
  setsid nohup "$@" >"$STATE/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/pids/$name.pid"
}
# wait_for WHAT SECONDS CMD...: poll until CMD succeeds.
wait_for() {
  local what=$1 secs=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $end ]; then log "timed out waiting for $what"; return 1; fi
    sleep 0.2
  done
  log "[$(since)s] $what"
}

"$here/pki.sh"
log "[$(since)s] pki ready"

# etcd: throw-away, so no fsync.
start etcd etcd --name e2e --data-dir "$STATE/etcd" --unsafe-no-fsync \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "e2e=http://127.0.0.1:$ETCD_PEER_PORT" --log-level warn

# containerd v2 (CDI on by default). This VM lacks CAP_SYS_RESOURCE, so the
# oom_score_adj the kubelet asks for must be clamped, or runc fails.
sed -e "s|@STATE@|$STATE|g" -e "s|@CDI_DIR@|$CDI_DIR|g" -e "s|@PAUSE_IMAGE@|$PAUSE_IMAGE|g" \
  "$here/config/containerd.toml" >"$STATE/containerd.toml"
sed -e "s|@STATE@|$STATE|g" -e "s|@BRIDGE@|$BRIDGE|g" -e "s|@POD_CIDR@|$POD_CIDR|g" \
  "$here/config/10-bridge.conflist" >"$STATE/cni/net.d/10-bridge.conflist"
start containerd containerd --config "$STATE/containerd.toml"
wait_for "etcd ready" 60 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
wait_for "containerd ready" 60 ctr -a "$CONTAINERD_SOCK" version

for img in "$STATE"/images/*.tar; do
  [ -e "$img" ] || continue
  ctr -a "$CONTAINERD_SOCK" -n k8s.io images import --all-platforms "$img" >/dev/null
done
log "[$(since)s] images imported: $(ls "$STATE"/images/ | tr '\n' ' ')"

P=$STATE/pki
start kube-apiserver kube-apiserver \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$APISERVER_PORT" \
  --service-cluster-ip-range "$SERVICE_CIDR" --allow-privileged \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --client-ca-file "$P/ca.crt" --tls-cert-file "$P/apiserver.crt" --tls-private-key-file "$P/apiserver.key" \
  --kubelet-client-certificate "$P/admin.crt" --kubelet-client-key "$P/admin.key" \
  --kubelet-preferred-address-types InternalIP,Hostname \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$P/sa.pub" --service-account-signing-key-file "$P/sa.key" \
  --profiling=false
wait_for "kube-apiserver ready" 120 kubectl --kubeconfig "$KUBECONFIG_ADMIN" get --raw /readyz

start kube-controller-manager kube-controller-manager --kubeconfig "$P/admin.kubeconfig" \
  --authentication-kubeconfig "$P/admin.kubeconfig" --authorization-kubeconfig "$P/admin.kubeconfig" \
  --leader-elect=false --use-service-account-credentials \
  --service-account-private-key-file "$P/sa.key" --root-ca-file "$P/ca.crt" \
  --cluster-signing-cert-file "$P/ca.crt" --cluster-signing-key-file "$P/ca.key" \
  --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --profiling=false
start kube-scheduler kube-scheduler --kubeconfig "$P/admin.kubeconfig" \
  --authentication-kubeconfig "$P/admin.kubeconfig" --authorization-kubeconfig "$P/admin.kubeconfig" \
  --leader-elect=false --bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --profiling=false

# The kubelet puts pods under its own cgroup root in every v1 hierarchy.
for h in /sys/fs/cgroup/*/; do
  case $h in */unified/) continue ;; esac
  mkdir -p "$h${CGROUP_ROOT#/}"
  if [ -e "$h/cpuset.cpus" ]; then
    cat "$h/cpuset.cpus" >"$h${CGROUP_ROOT#/}/cpuset.cpus"
    cat "$h/cpuset.mems" >"$h${CGROUP_ROOT#/}/cpuset.mems"
  fi
done
mkdir -p "/sys/fs/cgroup/unified${CGROUP_ROOT}" 2>/dev/null || true
sed -e "s|@STATE@|$STATE|g" -e "s|@POD_CIDR@|$POD_CIDR|g" -e "s|@CGROUP_ROOT@|$CGROUP_ROOT|g" \
  -e "s|@KUBELET_PORT@|$KUBELET_PORT|g" -e "s|@KUBELET_HEALTHZ_PORT@|$KUBELET_HEALTHZ_PORT|g" \
  -e "s|@CONTAINERD_SOCK@|$CONTAINERD_SOCK|g" \
  "$here/config/kubelet.yaml" >"$STATE/kubelet.yaml"
# The node's (fake) GPUs: the label NVIDIA's GPU Feature Discovery puts on
# GPU nodes, which the chart's default node affinity asks for.
start kubelet kubelet --config "$STATE/kubelet.yaml" --kubeconfig "$P/kubelet.kubeconfig" \
  --root-dir "$KUBELET_DIR" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" -v 2 \
  --node-labels nvidia.com/gpu.present=true
start kube-proxy kube-proxy --kubeconfig "$P/admin.kubeconfig" --proxy-mode iptables \
  --cluster-cidr "$POD_CIDR" --hostname-override "$NODE_NAME" --conntrack-max-per-core 0 \
  --metrics-bind-address "127.0.0.1:$PROXY_METRICS_PORT" --healthz-bind-address "127.0.0.1:$PROXY_HEALTHZ_PORT"

K="kubectl --kubeconfig $KUBECONFIG_ADMIN"
wait_for "node registered" 120 $K get node "$NODE_NAME"
wait_for "node Ready" 120 $K wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
wait_for "default ServiceAccount (cluster ready)" 120 $K -n default get serviceaccount default
echo "$KUBECONFIG_ADMIN"

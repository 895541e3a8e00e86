#!/usr/bin/env bash
# Starts the multi-node local cluster (GPUDRA_LC_NODES > 1; up.sh runs this):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and Kueue as
# host processes, the API server on a bridge ($NODE_IP), and one node per
# profile of GPUDRA_LC_PROFILES (node.sh), each in its own namespaces. The
# control plane serves the Workload API and PodGroup claims ($MN_FEATURE_GATES).
# Prints the admin kubeconfig's path; down.sh stops it all.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
source "$here/controlplane.sh"
[ "$(id -u)" -eq 0 ] || { echo "up-nodes.sh: must run as root" >&2; exit 1; }
if [ "${#NODE_PROFILES[@]}" -lt "$NODES" ]; then
  echo "up-nodes.sh: GPUDRA_LC_PROFILES names ${#NODE_PROFILES[@]} profile(s) for $NODES nodes" >&2; exit 1
fi
mkdir -p "$STATE"/{pki,logs,pids,etcd,images,nodes}
echo "$NODES" >"$STATE/nodes/count"

# Host state that down.sh restores or removes. The nodes' pods reach each
# other through the host (ip_forward); the service range and any pod range
# no node has are unreachable, so that no packet for them takes the host's
# default route out of the machine.
[ -e "$STATE/ip_forward.before" ] || cat /proc/sys/net/ipv4/ip_forward >"$STATE/ip_forward.before"
ip link add "$MN_BRIDGE" type bridge
ip addr add "$NODE_IP/24" dev "$MN_BRIDGE"
ip link set "$MN_BRIDGE" up
ip route add unreachable "$SERVICE_CIDR"
ip route add unreachable "$MN_POD_RANGE"
echo 1 >/proc/sys/net/ipv4/ip_forward

"$here/pki.sh"
log "[$(lc_since)s] pki ready"
start_etcd
wait_etcd
# With no kube-proxy on the host, the API server reaches webhooks behind
# Services (the chart's) through their endpoints, the pods' IPs.
start_apiserver --enable-aggregator-routing=true --feature-gates "$MN_FEATURE_GATES" --runtime-config "$MN_RUNTIME_CONFIG"
wait_apiserver
start_controller_manager --feature-gates "$MN_FEATURE_GATES"
start_scheduler --feature-gates "$MN_FEATURE_GATES"

for i in $(seq 1 "$NODES"); do
  "$here/node.sh" up "$i" "${NODE_PROFILES[$((i - 1))]}"
done
K="kubectl --kubeconfig $KUBECONFIG_ADMIN"
lc_wait_for "default ServiceAccount (cluster ready)" 120 $K -n default get serviceaccount default
# GPUDRA_LC_KUEUE=0 leaves Kueue out (its scenario then fails).
[ "${GPUDRA_LC_KUEUE:-1}" = 0 ] || "$here/kueue.sh" start
echo "$KUBECONFIG_ADMIN"

# Sourced by the local-cluster scripts: where things are and which ports.
# Everything the cluster writes lives under $STATE, except what the kernel
# holds: the node IP on lo, the pod bridge, iptables rules and the cgroups
# under $CGROUP_ROOT. down.sh removes all of it.
STATE=${GPUDRA_E2E_STATE:-/var/lib/gpudra-e2e}
CACHE=${GPUDRA_CACHE:-$HOME/.cache/gpudra}
NODE_NAME=${GPUDRA_E2E_NODE:-e2e-node}
# A second control plane can run beside this cluster (the fleet benchmark,
# hack/fleetbench): it sets its own GPUDRA_E2E_STATE, GPUDRA_LC_NODE_IP and
# GPUDRA_LC_PORT_OFFSET (added to every port below).
NODE_IP=${GPUDRA_LC_NODE_IP:-10.249.0.1}  # added to lo: reachable from pods, touches no NIC
POD_CIDR=10.247.0.0/24
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
BRIDGE=gpudrae2e0
CGROUP_ROOT=/gpudra-e2e
PORT_OFFSET=${GPUDRA_LC_PORT_OFFSET:-0}
ETCD_PORT=$((23790 + PORT_OFFSET))
ETCD_PEER_PORT=$((23791 + PORT_OFFSET))
APISERVER_PORT=$((26443 + PORT_OFFSET))
KCM_PORT=$((20257 + PORT_OFFSET))
SCHED_PORT=$((20259 + PORT_OFFSET))
KUBELET_PORT=$((20250 + PORT_OFFSET))
KUBELET_HEALTHZ_PORT=$((20248 + PORT_OFFSET))
PROXY_METRICS_PORT=$((20249 + PORT_OFFSET))
PROXY_HEALTHZ_PORT=$((20256 + PORT_OFFSET))
CONTAINERD_SOCK=$STATE/run/containerd/containerd.sock
KUBECONFIG_ADMIN=$STATE/pki/admin.kubeconfig
# Where the chart must put the plugin's host paths on this cluster.
KUBELET_DIR=$STATE/kubelet
CDI_DIR=$STATE/run/cdi
FAKE_STATE_DIR=$STATE/gpudra-fake
# Images the cluster knows without a registry.
PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
BUSYBOX_IMAGE=localhost/busybox:e2e
PLUGIN_IMAGE_REPO=localhost/gpudra
PLUGIN_IMAGE_TAG=e2e

# Several nodes (GPUDRA_LC_NODES > 1, node.sh): each node is a network
# namespace with its own containerd, kubelet and kube-proxy, its own /run
# and /var/lib/kubelet, and its own fake machine (GPUDRA_LC_PROFILES, one
# profile per node). The API server then listens on a bridge the nodes hang
# off, and the control plane serves the Workload API (gang scheduling,
# PodGroup claims), which Kueue (started beside it) and the training
# scenarios use.
#
# A profile entry PROFILE@CLUSTER_UUID:CLIQUE:TRAY makes the node a tray of
# a multi-node NVLink fabric (a model such as gb200): its GPUs report that
# cluster UUID (the NVLink domain, one per rack) and clique, and the tray
# index in the rack (node.sh writes them into the node's profile file).
# The default: two DGX H100, the mixed node, then four GB200 trays in two
# racks, three in rack A and one in rack B, in NMX's default partition
# (clique 32766), so that a gang of three trays fits one domain only and
# a gang of four none (e2e/multinode_nvlink_test.go).
NODES=${GPUDRA_LC_NODES:-1}
MN_RACK_A=9f410827-0000-4000-8000-000000000001
MN_RACK_B=9f410827-0000-4000-8000-000000000002
NODE_PROFILES=(${GPUDRA_LC_PROFILES:-dgx-h100 dgx-h100 mixed gb200-tray@$MN_RACK_A:32766:0 gb200-tray@$MN_RACK_A:32766:1 gb200-tray@$MN_RACK_A:32766:2 gb200-tray@$MN_RACK_B:32766:0})
MN_BRIDGE=gpudrae2emn0
MN_PREFIX=10.250.0
MN_POD_RANGE=10.247.0.0/16
if [ "$NODES" -gt 1 ]; then
  NODE_IP=${GPUDRA_LC_NODE_IP:-$MN_PREFIX.1}
fi
# Beta in 1.37 and off by default: the Workload API (scheduling.k8s.io/v1beta1
# Workload and PodGroup, with the GangScheduling plugin) and ResourceClaims
# for PodGroups. Alpha in 1.37: topology-aware workload scheduling (a
# PodGroup's spec.schedulingConstraints.topology), without which the
# scheduler places a gang pod by pod and may fence it with its first pod's
# IMEX channel into an NVLink domain too small for it, then retry the same
# choice (docs/nvlink.md). Every component that reads them gets the gates.
MN_FEATURE_GATES=GenericWorkload=true,DRAWorkloadResourceClaims=true,TopologyAwareWorkloadScheduling=true
MN_RUNTIME_CONFIG=scheduling.k8s.io/v1beta1=true
mn_node_name() { echo "e2e-node-$1"; }
mn_node_ip() { echo "$MN_PREFIX.$(($1 + 1))"; }
mn_node_dir() { echo "$STATE/nodes/$1"; }
mn_netns() { echo "gpudra-e2e-n$1"; }
# mn_fabric N: node N's NVLink domain, CLUSTER_UUID:CLIQUE, or nothing
# when its profile entry is no fabric tray.
mn_fabric() {
  local entry=${NODE_PROFILES[$(($1 - 1))]}
  [ "$entry" != "${entry%%@*}" ] || return 0
  local uuid clique tray
  IFS=: read -r uuid clique tray <<<"${entry#*@}"
  echo "$uuid:$clique"
}
# Inside a node, the plugin's host paths are the chart's defaults (they are
# the node's own), but for the fake state, which must live under the node's
# /run rather than on the shared disk.
MN_KUBELET_DIR=/var/lib/kubelet
MN_CDI_DIR=/var/run/cdi
MN_FAKE_STATE_DIR=/run/gpudra/fake # under /run: node.sh writes it at $D/run/...
MN_FAKE_PROFILE=$MN_FAKE_STATE_DIR/profile.yaml
KUEUE_WEBHOOK_PORT=$((29443 + PORT_OFFSET))
KUEUE_METRICS_PORT=$((28443 + PORT_OFFSET))
KUEUE_HEALTH_PORT=$((28081 + PORT_OFFSET))

eval "$("$(dirname "${BASH_SOURCE[0]}")/build.sh" paths)"
export PATH="$CONTAINERD_BIN:$K8S_BIN:$ETCD_BIN:$PATH"

log() { echo "[e2e-local $(date +%T.%3N | cut -c1-12)] $*"; }

# write_chart_values FILE: the chart values that put the plugin's host paths
# where this cluster has them and use the images images.sh imported
# (e2e-local.sh, chaos.sh).
write_chart_values() {
  if [ "$NODES" -gt 1 ]; then
    cat >"$1" <<VALUES
# Chart values for the $NODES-node local cluster (written by $(basename "$0")):
# each node's paths are its own; each node's profile file names its machine.
image:
  repository: $PLUGIN_IMAGE_REPO
  tag: $PLUGIN_IMAGE_TAG
  pullPolicy: Never
kubeletDir: $MN_KUBELET_DIR
cdiDir: $MN_CDI_DIR
fakeStateDir: $MN_FAKE_STATE_DIR
fakeProfile: $MN_FAKE_PROFILE
# The trays run stand-in IMEX daemons as host services (node.sh), which
# the plugins ask as they ask NVIDIA's (kubeletPlugin.imex.daemon: host,
# the default; the fake backend's socket is the fake state's).
VALUES
    return
  fi
  cat >"$1" <<VALUES
# Chart values for the local cluster (written by $(basename "$0")).
image:
  repository: $PLUGIN_IMAGE_REPO
  tag: $PLUGIN_IMAGE_TAG
  pullPolicy: Never
kubeletDir: $KUBELET_DIR
cdiDir: $CDI_DIR
fakeStateDir: $FAKE_STATE_DIR
VALUES
}

# suite_env: the environment the e2e suite (and the chaos run) needs for
# this cluster; use as: env "${suite_env[@]}" go test ...
suite_env=(KUBECONFIG="$KUBECONFIG_ADMIN" GPUDRA_E2E_HELM="$HELM" GPUDRA_E2E_KUBECTL="$K8S_BIN/kubectl"
  GPUDRA_E2E_VALUES="$STATE/values.yaml" GPUDRA_E2E_TEST_IMAGE="$BUSYBOX_IMAGE" GPUDRA_E2E_PULL_POLICY=Never
  # The gpudra CLI the image carries (images.sh); what the README install
  # scenario needs to follow the README on this cluster: how its images
  # are loaded, and where its node keeps what a standard node has at
  # /var/lib/kubelet and /var/run/cdi.
  GPUDRA_E2E_GPUDRA="$STATE/bin/gpudra" GPUDRA_E2E_IMAGE_LOAD=ctr GPUDRA_E2E_CTR="$CONTAINERD_BIN/ctr"
  GPUDRA_E2E_CONTAINERD_ADDRESS="$CONTAINERD_SOCK" GPUDRA_E2E_NODE_KUBELET_DIR="$KUBELET_DIR" GPUDRA_E2E_NODE_CDI_DIR="$CDI_DIR"
  # The host PIDs of the cluster's processes (the trays' stand-in IMEX
  # daemons: imex-N.pid), which the multi-node suite signals.
  GPUDRA_E2E_LC_PIDS="$STATE/pids")

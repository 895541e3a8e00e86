# Sourced by the local-cluster scripts: where things are and which ports.
# Everything the cluster writes lives under $STATE, except what the kernel
# holds: the node IP on lo, the pod bridge, iptables rules and the cgroups
# under $CGROUP_ROOT. down.sh removes all of it.
STATE=${GPUDRA_E2E_STATE:-/var/lib/gpudra-e2e}
CACHE=${GPUDRA_CACHE:-$HOME/.cache/gpudra}
NODE_NAME=${GPUDRA_E2E_NODE:-e2e-node}
NODE_IP=10.249.0.1          # added to lo: reachable from pods, touches no NIC
POD_CIDR=10.247.0.0/24
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
BRIDGE=gpudrae2e0
CGROUP_ROOT=/gpudra-e2e
ETCD_PORT=23790
ETCD_PEER_PORT=23791
APISERVER_PORT=26443
KCM_PORT=20257
SCHED_PORT=20259
KUBELET_PORT=20250
KUBELET_HEALTHZ_PORT=20248
PROXY_METRICS_PORT=20249
PROXY_HEALTHZ_PORT=20256
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

eval "$("$(dirname "${BASH_SOURCE[0]}")/build.sh" paths)"
export PATH="$CONTAINERD_BIN:$K8S_BIN:$ETCD_BIN:$PATH"

log() { echo "[e2e-local $(date +%T.%3N | cut -c1-12)] $*"; }

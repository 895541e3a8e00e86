#!/usr/bin/env bash
# One kubelet node of the multi-node local cluster (GPUDRA_LC_NODES > 1),
# after ../shared/research/multinode.md:
#
#   node.sh up N PROFILE   start node N with the fake machine PROFILE
#                          (PROFILE@CLUSTER_UUID:CLIQUE:TRAY: a tray of
#                          a multi-node NVLink fabric, see env.sh)
#   node.sh down N         stop node N and remove everything it left
#
# Node N is a network namespace (IP 10.250.0.N+1 on the bridge the API
# server listens on, pods in 10.247.N.0/24) with a mount, UTS and PID
# namespace of its own, in which containerd and the kubelet run; kube-proxy
# runs in its network namespace. Inside, $D/run is the node's /run (so
# /run/containerd, /var/run/cdi and the fake GPUs' state are the node's) and
# $D/kubelet its /var/lib/kubelet. SIGKILL of the namespace's first process
# ends the whole node, containers included. Nothing routes out of the
# machine: the namespace has no default route, and the host answers
# "unreachable" for the service and pod ranges it does not route to a node
# (up.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
source "$here/controlplane.sh"
cmd=$1 n=$2
D=$(mn_node_dir "$n")
NAME=$(mn_node_name "$n")
IP=$(mn_node_ip "$n")
NS=$(mn_netns "$n")
CIDR=10.247.$n.0/24
CG=/gpudra-e2e-n$n
SOCK=$D/run/containerd/containerd.sock
K="kubectl --kubeconfig $KUBECONFIG_ADMIN"

# write_profile ENTRY FILE: the node's profile file. A fabric entry
# (PROFILE@CLUSTER_UUID:CLIQUE:TRAY) adds what the tray's GPUs report of
# their fabric and their place in the rack (docs/fake-gpus.md): the
# cluster UUID and clique; the rack's chassis serial, one per cluster UUID
# (on an NVL72 rack every tray reports its rack's), made of "1820" and the
# UUID's last nine characters, after the captures' 1820000000001; the tray
# index, and the slot, which is the tray index + 10 in both public
# captures (GB200: slot 14, tray 4; GB300: slot 25, tray 15).
write_profile() {
  local entry=$1 file=$2
  local profile=${entry%%@*}
  printf 'profile: %s\n' "$profile" >"$file"
  [ "$entry" != "$profile" ] || return 0
  local uuid clique tray
  IFS=: read -r uuid clique tray <<<"${entry#*@}"
  if [ -z "$uuid" ] || ! [[ "$clique" =~ ^[0-9]+$ ]] || ! [[ "$tray" =~ ^[0-9]+$ ]]; then
    echo "node.sh: profile entry $entry: want PROFILE@CLUSTER_UUID:CLIQUE:TRAY, e.g. gb200-tray@$MN_RACK_A:32766:0" >&2
    return 1
  fi
  cat >>"$file" <<PROFILE
fabric: {clusterUUID: $uuid, cliqueID: $clique, state: COMPLETED, health: HEALTHY}
platform: {chassisSerial: "1820${uuid: -9}", slotNumber: $((tray + 10)), trayIndex: $tray}
PROFILE
}

node_up() {
  local entry=$1
  local profile=${entry%%@*}
  mkdir -p "$D"/{pki,logs,containerd,run/containerd,run/cdi,run/runc,cni/net.d,cni/ipam,kubelet,pod-logs}
  # $D/run is the node's /run: the fake state directory lives under it.
  mkdir -p "$D$MN_FAKE_STATE_DIR"
  rm -f "$D/images.done" "$SOCK"
  # The node's machine, read by the plugin's fake backend on this node.
  write_profile "$entry" "$D$MN_FAKE_PROFILE"

  # The kubelet's client certificate, signed by the cluster's CA.
  local P=$STATE/pki
  openssl genrsa -out "$D/pki/kubelet.key" 2048 2>/dev/null
  openssl req -new -key "$D/pki/kubelet.key" -subj "/O=system:nodes/CN=system:node:$NAME" -out "$D/pki/kubelet.csr" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' >"$D/pki/kubelet.ext"
  openssl x509 -req -in "$D/pki/kubelet.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 30 \
    -extfile "$D/pki/kubelet.ext" -out "$D/pki/kubelet.crt" 2>/dev/null
  sed -e "s|$P/admin\.|$D/pki/kubelet.|g" "$P/admin.kubeconfig" >"$D/pki/kubelet.kubeconfig"

  # Network: a veth from the bridge into the node's namespace.
  ip netns add "$NS"
  ip link add "$NS-h" type veth peer name "$NS-c"
  ip link set "$NS-h" master "$MN_BRIDGE" up
  ip link set "$NS-c" netns "$NS"
  ip -n "$NS" link set "$NS-c" name eth0
  ip -n "$NS" addr add "$IP/24" dev eth0
  ip -n "$NS" link set eth0 up
  ip -n "$NS" link set lo up
  # Other nodes' pods through the host; no default route, so nothing else
  # leaves the node.
  ip -n "$NS" route add "$MN_POD_RANGE" via "$NODE_IP"
  ip route add "$CIDR" via "$IP" dev "$MN_BRIDGE"

  # Configuration from the single-node templates, with this node's paths.
  sed -e "s|@STATE@|$D|g" -e "s|@CDI_DIR@|$MN_CDI_DIR|g" -e "s|@PAUSE_IMAGE@|$PAUSE_IMAGE|g" \
    "$here/config/containerd.toml" >"$D/containerd.toml"
  sed -e "s|@STATE@|$D|g" -e "s|@BRIDGE@|cni0|g" -e "s|@POD_CIDR@|$CIDR|g" \
    "$here/config/10-bridge.conflist" >"$D/cni/net.d/10-bridge.conflist"
  cp "$P/ca.crt" "$D/pki/ca.crt"
  sed -e "s|@STATE@|$D|g" -e "s|@POD_CIDR@|$CIDR|g" -e "s|@CGROUP_ROOT@|$CG|g" \
    -e "s|@KUBELET_PORT@|$KUBELET_PORT|g" -e "s|@KUBELET_HEALTHZ_PORT@|$KUBELET_HEALTHZ_PORT|g" \
    -e "s|@CONTAINERD_SOCK@|$SOCK|g" \
    "$here/config/kubelet.yaml" >"$D/kubelet.yaml"
  printf 'featureGates:\n' >>"$D/kubelet.yaml"
  tr ',' '\n' <<<"$MN_FEATURE_GATES" | sed 's/^\(.*\)=\(.*\)$/  \1: \2/' >>"$D/kubelet.yaml"
  lc_cgroup_root "$CG"

  # The node's first process: remounts /sys for the node's network
  # namespace (and the cgroup hierarchies that hides), puts the node's own
  # directories on /run and /var/lib/kubelet, starts containerd, waits for
  # the images, starts the kubelet, and reaps.
  cat >"$D/inner.sh" <<INNER
#!/usr/bin/env bash
set -u
hostname $NAME
# The cgroup hierarchies as the host mounts them, mounted again over the
# fresh /sys (which shows this node's network devices).
cgroups=\$(awk '\$1 ~ /^cgroup2?\$/ && \$2 ~ /^\/sys\/fs\/cgroup\// {print \$3, \$2, \$4}' /proc/self/mounts)
mount -t sysfs sysfs /sys
mount -t tmpfs tmpfs /sys/fs/cgroup
while read -r type dir opts; do
  [ -n "\$type" ] || continue
  mkdir -p "\$dir"; mount -t "\$type" -o "\$opts" cgroup "\$dir"
done <<<"\$cgroups"
mount --bind $D/run /run
mount --bind $D/kubelet $MN_KUBELET_DIR
mount --make-rshared /
export PATH="$PATH"
containerd --config $D/containerd.toml >$D/logs/containerd.log 2>&1 &
until ctr -a $SOCK version >/dev/null 2>&1; do sleep 0.1; done
until [ -e $D/images.done ]; do sleep 0.1; done
kubelet --config $D/kubelet.yaml --kubeconfig $D/pki/kubelet.kubeconfig --root-dir $MN_KUBELET_DIR \\
  --hostname-override $NAME --node-ip $IP -v 2 \\
  --node-labels nvidia.com/gpu.present=true,gpudra.io/e2e-profile=$profile >$D/logs/kubelet.log 2>&1 &
while true; do wait || true; sleep 1; done
INNER
  chmod +x "$D/inner.sh"
  # The mount point of the nodes' /var/lib/kubelet; the host's stays empty.
  if [ ! -d "$MN_KUBELET_DIR" ]; then
    mkdir -p "$MN_KUBELET_DIR"
    touch "$STATE/made-kubelet-dir"
  fi
  # --kill-child: when unshare dies (node.sh down SIGKILLs it), the node's
  # first process gets SIGKILL, and with it every process of the node.
  setsid nohup nsenter --net="/run/netns/$NS" \
    unshare --mount --uts --pid --fork --mount-proc --propagation private --kill-child=SIGKILL "$D/inner.sh" \
    >"$D/logs/inner.log" 2>&1 </dev/null 9>&- &
  echo $! >"$STATE/pids/node-$n.pid"

  lc_wait_for "$NAME: containerd ready" 60 ctr -a "$SOCK" version
  for img in "$STATE"/images/*.tar; do
    [ -e "$img" ] || continue
    ctr -a "$SOCK" -n k8s.io images import --all-platforms "$img" >/dev/null 2>&1
  done
  touch "$D/images.done"
  log "[$(lc_since)s] $NAME: images imported"
  setsid nohup nsenter --net="/run/netns/$NS" kube-proxy --kubeconfig "$KUBECONFIG_ADMIN" --proxy-mode iptables \
    --cluster-cidr "$MN_POD_RANGE" --hostname-override "$NAME" --conntrack-max-per-core 0 \
    --metrics-bind-address "127.0.0.1:$PROXY_METRICS_PORT" --healthz-bind-address "127.0.0.1:$PROXY_HEALTHZ_PORT" \
    >"$D/logs/kube-proxy.log" 2>&1 </dev/null 9>&- &
  echo $! >"$STATE/pids/kube-proxy-$n.pid"
  start_imex
  lc_wait_for "$NAME: registered" 120 $K get node "$NAME"
  lc_wait_for "$NAME: Ready" 120 $K wait --for=condition=Ready "node/$NAME" --timeout=1s
}

# start_imex: on a fabric tray, the stand-in IMEX daemon
# (internal/imexstandin, run by the plugin's binary), as the operator's
# nvidia-imex service runs on a real tray: a host process in the node's
# network namespace, started before any job, with NVIDIA's config keys.
# Its node list is every tray of its domain; its control socket is where
# the fake backend's nvidia-imex-ctl asks (the fake state directory).
# Its host PID is in $STATE/pids/imex-N.pid (the e2e suite hangs it with
# SIGSTOP).
start_imex() {
  local domain i
  domain=$(mn_fabric "$n")
  [ -n "$domain" ] || return 0
  mkdir -p "$D/imex"
  : >"$D/imex/nodes_config.cfg"
  for i in $(seq 1 "$NODES"); do
    [ "$(mn_fabric "$i")" = "$domain" ] && mn_node_ip "$i" >>"$D/imex/nodes_config.cfg"
  done
  cat >"$D/imex/config.cfg" <<CFG
# The stand-in reads NVIDIA's keys (docs/nvlink.md, "IMEX daemons").
SERVER_PORT=50000
BIND_INTERFACE_IP=$IP
IMEX_NODE_CONFIG_FILE=$D/imex/nodes_config.cfg
IMEX_WAIT_FOR_QUORUM=NONE
IMEX_CMD_ENABLED=1
IMEX_CMD_UNIX_DOMAIN_PATH=$D$MN_FAKE_STATE_DIR/imex_ctrl.sock
CFG
  setsid nohup nsenter --net="/run/netns/$NS" "$STATE/bin/gpudra-kubelet-plugin" fake-nvidia-imex -c "$D/imex/config.cfg" \
    >"$D/logs/imex.log" 2>&1 </dev/null 9>&- &
  echo $! >"$STATE/pids/imex-$n.pid"
  lc_wait_for "$NAME: IMEX daemon ready (domain $domain)" 30 \
    "$STATE/bin/gpudra-kubelet-plugin" fake-nvidia-imex-ctl -q --u="$D$MN_FAKE_STATE_DIR/imex_ctrl.sock"
}

node_down() {
  local f
  for f in "$STATE/pids/imex-$n.pid" "$STATE/pids/kube-proxy-$n.pid" "$STATE/pids/node-$n.pid"; do
    [ -e "$f" ] || continue
    kill -KILL "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
  # The node's processes go with its first one; wait for its cgroups to
  # empty, then remove them.
  sleep 0.5
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/unified/; do
    local d="${h%/}$CG"
    [ -d "$d" ] || continue
    find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r pid; do kill -KILL "$pid" 2>/dev/null; done
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
      [ -d "$d" ] || break
      sleep 0.5
    done
    [ -d "$d" ] && log "down: WARNING: cgroup $d remains"
  done
  ip route del "$CIDR" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  ip link del "$NS-h" 2>/dev/null || true
  # Mounts the node made are gone with its mount namespace; those under
  # $D seen from the host (none expected) go too.
  findmnt -rn -o TARGET | grep -F "$D/" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  return 0
}

case $cmd in
  up) node_up "${3:?node.sh up N PROFILE}" ;;
  down) node_down ;;
  *) echo "node.sh: up N PROFILE | down N" >&2; exit 2 ;;
esac

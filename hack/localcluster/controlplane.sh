# Sourced (after env.sh) by the scripts that run parts of the local cluster:
# up.sh (the e2e cluster) and hack/fleetbench/bench-fleet.sh (control plane
# only, no node). Each start_* function starts one component as a
# background process with a PID file in $STATE/pids and a log in
# $STATE/logs, with the PKI that pki.sh wrote in $STATE/pki.

lc_t0=$(date +%s%N)
# lc_since: seconds since this file was sourced, to one decimal.
lc_since() { local ms=$((($(date +%s%N) - lc_t0) / 1000000)); printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); }

# lc_start NAME CMD...: a background process with a PID file and a log.
# It does not inherit fd 9, which bench-fleet.sh holds /tmp/gpudra-e2e.lock on:
# a process left behind must not keep the lock.
lc_start() {
  local name=$1; shift
  setsid nohup "$@" >"$STATE/logs/$name.log" 2>&1 </dev/null 9>&- &
  echo $! >"$STATE/pids/$name.pid"
}

# lc_stop NAME: SIGTERM, up to 10 s, then SIGKILL; removes the PID file.
lc_stop() {
  local f="$STATE/pids/$1.pid" pid
  [ -e "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true  # gone after SIGTERM
  fi
  rm -f "$f"
}

# lc_wait_for WHAT SECONDS CMD...: poll until CMD succeeds.
lc_wait_for() {
  local what=$1 secs=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $end ]; then log "timed out waiting for $what"; return 1; fi
    sleep 0.2
  done
  log "[$(lc_since)s] $what"
}

# start_etcd: a throw-away etcd (no fsync) on $ETCD_PORT.
start_etcd() {
  lc_start etcd etcd --name e2e --data-dir "$STATE/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "e2e=http://127.0.0.1:$ETCD_PEER_PORT" --log-level warn
}

wait_etcd() { lc_wait_for "etcd ready" 60 curl -sf "http://127.0.0.1:$ETCD_PORT/health"; }

# start_apiserver: kube-apiserver on $NODE_IP:$APISERVER_PORT.
start_apiserver() {
  local P=$STATE/pki
  lc_start kube-apiserver kube-apiserver \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$APISERVER_PORT" \
    --service-cluster-ip-range "$SERVICE_CIDR" --allow-privileged \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --client-ca-file "$P/ca.crt" --tls-cert-file "$P/apiserver.crt" --tls-private-key-file "$P/apiserver.key" \
    --kubelet-client-certificate "$P/admin.crt" --kubelet-client-key "$P/admin.key" \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$P/sa.pub" --service-account-signing-key-file "$P/sa.key" \
    --profiling=false "$@"
}

wait_apiserver() { lc_wait_for "kube-apiserver ready" 120 kubectl --kubeconfig "$KUBECONFIG_ADMIN" get --raw /readyz; }

# start_controller_manager [ARGS...]: kube-controller-manager, every default
# controller; extra arguments are appended.
start_controller_manager() {
  local P=$STATE/pki
  lc_start kube-controller-manager kube-controller-manager --kubeconfig "$P/admin.kubeconfig" \
    --authentication-kubeconfig "$P/admin.kubeconfig" --authorization-kubeconfig "$P/admin.kubeconfig" \
    --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$P/sa.key" --root-ca-file "$P/ca.crt" \
    --cluster-signing-cert-file "$P/ca.crt" --cluster-signing-key-file "$P/ca.key" \
    --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --profiling=false "$@"
}

# start_scheduler [ARGS...]: kube-scheduler, serving on 127.0.0.1:$SCHED_PORT
# (health and /metrics); extra arguments are appended. GPUDRA_LC_SCHEDULER_V
# raises its log verbosity (4 shows each pod's attempts and why a node
# was filtered out; the log lands in $GPUDRA_E2E_LOGS).
start_scheduler() {
  local P=$STATE/pki
  lc_start kube-scheduler kube-scheduler --kubeconfig "$P/admin.kubeconfig" \
    --authentication-kubeconfig "$P/admin.kubeconfig" --authorization-kubeconfig "$P/admin.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --profiling=false \
    ${GPUDRA_LC_SCHEDULER_V:+-v="$GPUDRA_LC_SCHEDULER_V"} "$@"
}

# lc_cgroup_root ROOT: the cgroup a kubelet puts its pods under (its
# cgroupRoot), in every v1 hierarchy (with cpuset seeded from the parent, or
# no task could join it) and in the unified one.
lc_cgroup_root() {
  local root=${1#/} h
  for h in /sys/fs/cgroup/*/; do
    case $h in */unified/) continue ;; esac
    mkdir -p "$h$root"
    if [ -e "$h/cpuset.cpus" ]; then
      cat "$h/cpuset.cpus" >"$h$root/cpuset.cpus"
      cat "$h/cpuset.mems" >"$h$root/cpuset.mems"
    fi
  done
  mkdir -p "/sys/fs/cgroup/unified/$root" 2>/dev/null || true
}

#!/usr/bin/env bash
# Kueue on the multi-node local cluster, as a host process beside the
# control plane (like kube-controller-manager), built by build.sh from the
# module proxy:
#
#   kueue.sh start   CRDs, webhooks, the kueue-system namespace, the manager
#   kueue.sh stop    the manager (the objects go with the cluster)
#
# Its webhooks are served on $NODE_IP:$KUEUE_WEBHOOK_PORT with a certificate
# from the cluster's CA; the webhook configurations call that URL, and hold
# only the webhooks of what this cluster runs (Jobs and Kueue's own
# objects), so a pod's creation never waits for Kueue. Kueue's DRA support
# (KueueDRAIntegration, on since v0.18; the extended-resource path, on
# since v0.19) counts gpudra's GPUs under nvidia.com/gpu whether a pod asks
# for nvidia.com/gpu (through gpudra's DeviceClass extendedResourceName) or
# for a ResourceClaimTemplate of that class (deviceClassMappings below).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
source "$here/controlplane.sh"
K="kubectl --kubeconfig $KUBECONFIG_ADMIN"
W=$STATE/kueue

# The webhooks this cluster needs; the others (pods, deployments, Ray,
# Kubeflow, ...) would put Kueue in the path of objects it does not manage.
KEEP="mjob.kb.io vjob.kb.io mclusterqueue.kb.io vclusterqueue.kb.io vcohort.kb.io mresourceflavor.kb.io vresourceflavor.kb.io mworkload.kb.io vworkload.kb.io"

start() {
  mkdir -p "$W/certs"
  local P=$STATE/pki
  openssl genrsa -out "$W/certs/tls.key" 2048 2>/dev/null
  openssl req -new -key "$W/certs/tls.key" -subj "/CN=kueue-webhook" -out "$W/tls.csr" 2>/dev/null
  printf 'subjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n' "$NODE_IP" >"$W/tls.ext"
  openssl x509 -req -in "$W/tls.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 30 \
    -extfile "$W/tls.ext" -out "$W/certs/tls.crt" 2>/dev/null

  $K apply --server-side -f "$KUEUE_BIN/config/crd" >/dev/null
  $K wait --for condition=Established --timeout=60s -f "$KUEUE_BIN/config/crd" >/dev/null
  $K create namespace kueue-system --dry-run=client -o yaml | $K apply -f - >/dev/null

  local ca
  ca=$(base64 -w0 <"$P/ca.crt")
  awk -v keep=" $KEEP " '
    function flush() { if (inentry && index(keep, " " name " ")) printf "%s", buf; inentry = 0; buf = ""; name = "" }
    /^- admissionReviewVersions:/ { flush(); inentry = 1; buf = $0 "\n"; next }
    inentry && /^[^ -]/ { flush() }
    inentry { buf = buf $0 "\n"; if ($1 == "name:" && $0 ~ /^  name:/) name = $2; next }
    { print }
    END { flush() }' "$KUEUE_BIN/config/webhook.yaml" |
    sed -e '/^    service:$/d' -e '/^      name: webhook-service$/d' -e '/^      namespace: system$/d' \
      -e "s|^      path: \(.*\)$|    url: https://$NODE_IP:$KUEUE_WEBHOOK_PORT\1\n    caBundle: $ca|" \
      -e 's/^  name: \(mutating\|validating\)-webhook-configuration$/  name: kueue-\1-webhook-configuration/' \
      >"$W/webhooks.yaml"

  cat >"$W/config.yaml" <<CONFIG
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:$KUEUE_HEALTH_PORT
metrics:
  bindAddress: 127.0.0.1:$KUEUE_METRICS_PORT
webhook:
  host: $NODE_IP
  port: $KUEUE_WEBHOOK_PORT
  certDir: $W/certs
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
clientConnection:
  qps: 50
  burst: 100
integrations:
  frameworks:
  - batch/job
# gpudra's whole GPUs count as nvidia.com/gpu, asked for through a claim of
# the gpu.gpudra.io class or (extendedResourceName) as nvidia.com/gpu.
resources:
  deviceClassMappings:
  - name: nvidia.com/gpu
    deviceClassNames:
    - gpu.gpudra.io
CONFIG
  # Without its internal certificate management, Kueue reads its metrics
  # server's certificate from /etc/kueue/metrics/certs, a fixed path: it
  # runs in a mount namespace of its own whose /etc is an overlay of the
  # host's, so that the host's /etc stays as it is. The visibility API
  # server is not registered here (it would need an APIService).
  mkdir -p "$W/etc-upper" "$W/etc-work"
  cat >"$W/run.sh" <<RUN
#!/usr/bin/env bash
set -e
mount -t overlay overlay -o lowerdir=/etc,upperdir=$W/etc-upper,workdir=$W/etc-work /etc
mkdir -p /etc/kueue/metrics/certs
cp $W/certs/tls.crt $W/certs/tls.key /etc/kueue/metrics/certs/
export KUBECONFIG=$KUBECONFIG_ADMIN
exec $KUEUE_BIN/kueue --config $W/config.yaml --feature-gates VisibilityOnDemand=false --zap-log-level 2
RUN
  chmod +x "$W/run.sh"
  lc_start kueue unshare --mount --propagation private "$W/run.sh"
  lc_wait_for "kueue ready" 120 curl -sf "http://127.0.0.1:$KUEUE_HEALTH_PORT/readyz"
  # Webhooks last: from now on Jobs and Kueue's objects go through Kueue.
  $K apply -f "$W/webhooks.yaml" >/dev/null
  log "[$(lc_since)s] kueue webhooks registered"
}

case ${1:-} in
  start) start ;;
  stop) lc_stop kueue ;;
  *) echo "kueue.sh: start | stop" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# helm lint and helm template of deployments/helm/gpudra, offline: both
# backends, non-default values, and values the schema must reject; then
# the chart's Go tests over helm template and promtool (hack/promtool.sh
# gets promtool). Part of make test. The API server's own checks (CEL, field shapes) run in
# the e2e suite (kubectl apply --dry-run=server).
set -euo pipefail
HELM=${HELM:?HELM must name the helm binary}
chart=${1:-deployments/helm/gpudra}
# helm as build.sh builds it knows its release and the Kubernetes version it
# was built for, so it lints and renders the chart (kubeVersion >=1.34)
# offline, as a user's helm does, without --kube-version; KUBE_VERSION
# renders for another one.
kv=(${KUBE_VERSION:+--kube-version "$KUBE_VERSION"})
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
# helm warns on every run that files/deviceclasses is a symlink (on purpose).
quiet() { "$@" 2> >(grep -v 'found symbolic link in path' >&2); }

if [ -n "${HELM_VERSION:-}" ] && [ "$("$HELM" version --template '{{.Version}}')" != "$HELM_VERSION" ]; then
  echo "chart-check: $HELM says it is $("$HELM" version --short), want $HELM_VERSION (rebuild it: hack/localcluster/build.sh helm)"; exit 1
fi
quiet "$HELM" lint --strict "$chart" "${kv[@]}" >"$out/lint" || { cat "$out/lint"; exit 1; }
quiet "$HELM" lint --strict "$chart" "${kv[@]}" --set deviceBackend=fake >"$out/lint" || { cat "$out/lint"; exit 1; }

render() { quiet "$HELM" template gpudra "$chart" "${kv[@]}" --namespace gpudra "$@"; }
render >"$out/nvml.yaml"
render --set deviceBackend=fake --set fakeProfile=mixed --set driverName=gpu.example.com \
  --set featureGates.ContextualLogging=true --set kubeletDir=/var/lib/k0s/kubelet >"$out/fake.yaml"
render --set deviceBackend=fake --set-string 'fakeProfileFile=gpus: []' >"$out/profile.yaml"
# Least privilege (docs/security.md): the fake backend is never privileged,
# even when asked; control-plane nodes only when asked; an affinity of one's
# own replaces the default.
render --set deviceBackend=fake --set kubeletPlugin.privileged=true >"$out/fake-privileged.yaml"
render --set deviceBackend=fake --set kubeletPlugin.runOnControlPlane=true --set 'kubeletPlugin.gpuNodeLabels={example.com/gpu}' >"$out/controlplane.yaml"
render --set deviceBackend=fake --set kubeletPlugin.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=mine \
  --set kubeletPlugin.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists >"$out/affinity.yaml"
render --set deviceBackend=fake --set consumableCapacity.enabled=true --set consumableCapacity.sharing=TimeSlicing >"$out/shared.yaml"
render --set mps.enabled=false >"$out/nomps.yaml"
# The controller: with cert-manager, without the webhook, not at all.
render --set admissionWebhook.certManager.enabled=true --set controller.replicas=1 --set admissionWebhook.replicas=1 >"$out/certmanager.yaml"
render --set admissionWebhook.enabled=false --set configPolicy.enabled=true >"$out/nowebhook.yaml"
render --set controller.enabled=false >"$out/nocontroller.yaml"
render --set networkPolicies.enabled=true --set 'networkPolicies.apiServer[0].ipBlock.cidr=10.0.0.10/32' >"$out/networkpolicy.yaml"
render --set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true --set metrics.grafanaDashboard.enabled=true --set metrics.idleAfter=1h --set 'health.ignoredXIDs={13,92}' >"$out/monitoring.yaml"

# What the rendered manifests must say.
fail=0
expect() { if ! grep -qF -- "$2" "$out/$1"; then echo "chart-check: $1 lacks: $2"; fail=1; fi; }
expect nvml.yaml "kind: DaemonSet"
expect nvml.yaml "maxSurge: 1"
expect nvml.yaml "maxUnavailable: 0"
expect nvml.yaml "priorityClassName: system-node-critical"
expect nvml.yaml "fieldPath: metadata.uid"
expect nvml.yaml "kind: ValidatingAdmissionPolicy"
expect nvml.yaml "kind: DeviceClass"
expect nvml.yaml "name: gpu.gpudra.io"
expect nvml.yaml "mountPath: /var/lib/kubelet/plugins/gpu.gpudra.io"
expect nvml.yaml "path: /var/lib/kubelet/plugins/gpu.gpudra.io"
expect fake.yaml "device.driver == 'gpu.example.com'"
expect fake.yaml "name: gpu.example.com"
expect fake.yaml "--feature-gates=ContextualLogging=true"
expect fake.yaml 'value: "mixed"'
expect fake.yaml "mountPath: /var/lib/k0s/kubelet/plugins/gpu.example.com"
expect profile.yaml "kind: ConfigMap"
expect nvml.yaml "name: MPS_DAEMON_IMAGE"
if [ "$(grep -c 'name: HOST_DRIVER_ROOT' "$out/nvml.yaml")" != 1 ]; then echo "chart-check: HOST_DRIVER_ROOT is not set exactly once"; fail=1; fi
expect nvml.yaml "'mps-control-daemon'"
expect shared.yaml "name: CONSUMABLE_CAPACITY"
expect shared.yaml 'value: "TimeSlicing"'
expect shared.yaml "!object.spec.?hostPID.orValue(false)"
if grep -q "mps-control-daemon\|MPS_DAEMON_IMAGE" "$out/nomps.yaml"; then echo "chart-check: mps.enabled=false still renders the MPS daemon's rights"; fail=1; fi
expect profile.yaml 'value: "/etc/gpudra/profile/profile.yaml"'
nexpect() { if grep -qF -- "$2" "$out/$1"; then echo "chart-check: $1 must not have: $2"; fail=1; fi; }
for f in fake.yaml fake-privileged.yaml; do
  expect $f "privileged: false"
  nexpect $f "privileged: true"
  expect $f "allowPrivilegeEscalation: false"
  expect $f 'drop: ["ALL"]'
  nexpect $f "add:"
done
for f in nvml.yaml fake.yaml; do
  expect $f "type: RuntimeDefault"
  expect $f "readOnlyRootFilesystem: true"
  expect $f "service: liveness"
  expect $f "service: readiness"
  expect $f "port: 51515"
  expect $f "key: nvidia.com/gpu.present"
  expect $f "key: feature.node.kubernetes.io/pci-10de.present"
  expect $f "key: node-role.kubernetes.io/control-plane"
  expect $f "key: nvidia.com/gpu"
  # Tolerating every taint would put the plugin on control-plane nodes.
  if awk '/tolerations:/{t=1;next} t&&/^      [a-z]/{t=0} t' "$out/$f" | grep -q -- "- operator: Exists"; then
    echo "chart-check: $f tolerates every taint"; fail=1
  fi
done
expect nvml.yaml "privileged: true"
expect controlplane.yaml "key: example.com/gpu"
nexpect controlplane.yaml "node-role.kubernetes.io/control-plane"
expect affinity.yaml "key: mine"
nexpect affinity.yaml "nvidia.com/gpu.present"
# The controller: a Deployment with leader election for the fleet
# accounting, the webhook in a Deployment of its own, with match
# conditions, self-managed certificates by default, cert-manager's on
# request; both with a soft memory limit from their container's.
expect nvml.yaml "command: [\"/usr/bin/gpudra-controller\"]"
expect nvml.yaml "--leader-election-lease=gpudra-controller"
expect nvml.yaml "--leader-election-lease=gpudra-webhook"
expect nvml.yaml "--fleet-accounting=false"
expect nvml.yaml "--webhook-timeout=5s"
expect nvml.yaml "--webhook-max-inflight-bytes=32Mi"
if [ "$(grep -c 'resource: limits.memory' "$out/nvml.yaml")" != 2 ]; then echo "chart-check: MEMORY_LIMIT is not passed to both controller Deployments"; fail=1; fi
expect nvml.yaml "kind: ValidatingWebhookConfiguration"
expect nvml.yaml "--cert-secret=gpudra-webhook-cert"
expect nvml.yaml "c.?opaque.?driver.orValue('') == 'gpu.gpudra.io'"
expect nvml.yaml "request.operation != 'UPDATE' || object.spec.?devices.?config.orValue([]).filter("
expect nvml.yaml "kind: PodDisruptionBudget"
expect nvml.yaml "readOnlyRootFilesystem: true"
nexpect nvml.yaml "kind: NetworkPolicy"
expect networkpolicy.yaml "kind: NetworkPolicy"
expect networkpolicy.yaml "cidr: 10.0.0.10/32"
if render --set networkPolicies.enabled=true >/dev/null 2>&1; then echo "chart-check: the webhook's NetworkPolicy renders without the API server's addresses"; fail=1; fi
expect fake.yaml "name: resourceclaims.gpu.example.com"
expect certmanager.yaml "cert-manager.io/inject-ca-from: gpudra/gpudra-webhook-cert"
expect certmanager.yaml "--leader-election-lease="
expect certmanager.yaml "kind: Certificate"
expect certmanager.yaml "--tls-cert-file=/etc/gpudra/webhook-cert/tls.crt"
if grep -q "kind: PodDisruptionBudget" "$out/certmanager.yaml"; then echo "chart-check: a PodDisruptionBudget for one replica blocks every drain"; fail=1; fi
if grep -q "kind: ValidatingWebhookConfiguration" "$out/nowebhook.yaml"; then echo "chart-check: admissionWebhook.enabled=false still renders the webhook"; fail=1; fi
expect nowebhook.yaml "--webhook-address="
expect nowebhook.yaml "name: gpudra-configs"
expect nowebhook.yaml "e.?opaque.?driver.orValue('') == 'gpu.gpudra.io'"
if grep -q "gpudra-controller" "$out/nocontroller.yaml"; then echo "chart-check: controller.enabled=false still renders the controller"; fail=1; fi
# Metrics: the plugin serves them and is ready when its slices are
# published; a ServiceMonitor on request.
expect nvml.yaml "--metrics-address=:8080"
expect nvml.yaml "service: readiness"
expect nvml.yaml "gpudra-metrics: \"true\""
expect monitoring.yaml "kind: ServiceMonitor"
expect monitoring.yaml "honorLabels: true"
expect monitoring.yaml "kind: PrometheusRule"
expect monitoring.yaml "alert: GPUDRAStrandedGPUs"
expect monitoring.yaml "for: 1h"
expect monitoring.yaml '{{ $labels.namespace }}/{{ $labels.claim }}'
expect monitoring.yaml 'grafana_dashboard: "1"'
expect monitoring.yaml '"uid": "gpudra-overview"'
for k in PrometheusRule ServiceMonitor; do
  if grep -q "kind: $k" "$out/nvml.yaml"; then echo "chart-check: a $k by default needs the Prometheus Operator's CRDs"; fail=1; fi
done
expect monitoring.yaml "--idle-after=1h"
expect monitoring.yaml "--ignored-xids=13,92"
expect nvml.yaml "--health-recheck-interval=30s"
# Another driver name must not collide with the default installation:
# no class, selector or attribute domain of gpudra.io, no extended resources.
# (The config API group resource.gpudra.io is the same for every driver.)
if grep -v "^#" "$out/fake.yaml" | grep -v "apiVersion: resource[.]gpudra[.]io/" | grep -q "gpudra[.]io"; then echo "chart-check: driverName=gpu.example.com still renders gpudra.io names"; fail=1; fi
if grep -q "extendedResourceName" "$out/fake.yaml"; then echo "chart-check: driverName=gpu.example.com keeps extendedResourceName"; fail=1; fi
# The whole-GPU class maps nvidia.com/gpu unless the admin turns the mapping off.
expect nvml.yaml "extendedResourceName: nvidia.com/gpu"
if render --set deviceClasses.extendedResourceNames=false | grep -q "extendedResourceName"; then echo "chart-check: extendedResourceNames=false keeps extendedResourceName"; fail=1; fi

expect nvml.yaml 'name: MIG_PROFILES'
expect nvml.yaml '--install-cdi-hook=/host-cdi-hook'
expect nvml.yaml 'value: "/var/lib/gpudra/bin/nvidia-cdi-hook"'
expect nvml.yaml 'mountPath: /driver-root'
expect fake.yaml 'name: install-cdi-hook'
# What the schema must reject.
for bad in migProfiles=1g10gb migSpareGPUs=0 migSpareGPUs=some deviceBackend=cuda fakeProfile=dgx-x100 driverName=NoDots image.pullPolicy=Sometimes \
  logVerbosity=11 kubeletDir=relative/path featureGates.lowercase=true unknownValue=1 \
  kubeletPlugin.updateStrategy.type=Recreate kubeletPlugin.healthcheckPort=0 'kubeletPlugin.gpuNodeLabels={bad label}' \
  consumableCapacity.sharing=mps mps.replicas=1 \
  admissionWebhook.failurePolicy=Sometimes controller.recomputeInterval=soon controller.replicas=0 \
  admissionWebhook.replicas=0 admissionWebhook.maxInFlightBytes=lots networkPolicies.apiServer=everyone \
  admissionWebhook.certManager.issuerRef.kind=Secret metrics.idleThreshold=2 metrics.idleAfter=forever; do
  if render --set "$bad" >/dev/null 2>&1; then echo "chart-check: the schema accepts $bad"; fail=1; fi
done
[ $fail -eq 0 ] && echo "chart-check: helm lint and template ok ($(grep -c '^kind:' "$out/nvml.yaml") objects)"

# Go tests over the rendered manifests (node pools, labels, requests,
# NetworkPolicies) and the alert rules, run by promtool as the chart
# renders them (deployments/helm/gpudra/*_test.go, build tag chart).
PROMTOOL=${PROMTOOL:-$(hack/promtool.sh)}
(cd "$chart" && HELM=$HELM PROMTOOL=$PROMTOOL KUBE_VERSION=${KUBE_VERSION:-} go test ${GOTESTFLAGS:--count=1} -tags chart .) || fail=1
exit $fail

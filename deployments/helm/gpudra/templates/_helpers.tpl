{{/* The chart's name (nameOverride) and the release-scoped prefix of every object's name (fullnameOverride). */}}
{{- define "gpudra.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpudra.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The standard labels, on every object of the chart. */}}
{{- define "gpudra.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "gpudra.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpudra
{{- end -}}

{{- define "gpudra.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpudra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Every plugin pod of the release, whatever its node pool: the metrics Service selects these. */}}
{{- define "gpudra.pluginSelectorLabels" -}}
{{ include "gpudra.selectorLabels" . }}
app.kubernetes.io/component: kubelet-plugin
{{- end -}}

{{- define "gpudra.pluginName" -}}
{{- printf "%s-kubelet-plugin" (include "gpudra.fullname" .) -}}
{{- end -}}

{{- define "gpudra.serviceAccountName" -}}
{{- default (include "gpudra.pluginName" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "gpudra.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The security context of a container that needs no privilege: no
capabilities, no privilege escalation, a read-only root file system. It runs
as root (UID 0) without capabilities: the host directories it writes (the
plugin data directory, /var/run/cdi, the kubelet's plugins_registry) belong
to root, and as their owner it may write them without CAP_DAC_OVERRIDE.
docs/security.md explains each field. Other containers of this chart (init
containers) include it too.
*/}}
{{- define "gpudra.unprivilegedSecurityContext" -}}
privileged: false
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsUser: 0
runAsGroup: 0
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/*
The ConfigMap through which gpudra-controller tells the kubelet plugins in
fleet mode (migSpareGPUs: fleet) which nodes keep a MIG spare (docs/mig.md,
"Spares across the fleet").
*/}}
{{- define "gpudra.migSparesName" -}}
{{- printf "%s-mig-spares" (include "gpudra.fullname" .) -}}
{{- end -}}

{{/*
A pool's --mig-spare-gpus. fleet needs the controller, which assigns the
spares; without it every node keeps one, the mode before fleet budgets.
Called with (dict "root" $ "pool" $pool).
*/}}
{{- define "gpudra.migSpareGPUs" -}}
{{- $v := toString .pool.migSpareGPUs -}}
{{- if and (eq $v "fleet") (not .root.Values.controller.enabled) -}}1{{- else -}}{{ $v }}{{- end -}}
{{- end -}}

{{/* "true" when a pool's plugins take their spares from the controller. */}}
{{- define "gpudra.fleetSpares" -}}
{{- $fleet := false -}}
{{- range $pool := include "gpudra.pools" . | fromJsonArray -}}
{{- if eq (include "gpudra.migSpareGPUs" (dict "root" $ "pool" $pool)) "fleet" }}{{ $fleet = true }}{{ end -}}
{{- end -}}
{{- $fleet -}}
{{- end -}}

{{/* gpudra-controller: Deployment, Service, webhook configuration and Lease share this name. */}}
{{- define "gpudra.controllerName" -}}
{{- printf "%s-controller" (include "gpudra.fullname" .) -}}
{{- end -}}

{{- define "gpudra.controllerSelectorLabels" -}}
{{ include "gpudra.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "gpudra.controllerServiceAccountName" -}}
{{- default (include "gpudra.controllerName" .) .Values.controller.serviceAccount.name -}}
{{- end -}}

{{/* The admission webhook: Deployment, Service, webhook configuration and Lease share this name. */}}
{{- define "gpudra.webhookName" -}}
{{- printf "%s-webhook" (include "gpudra.fullname" .) -}}
{{- end -}}

{{- define "gpudra.webhookSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "gpudra.webhookServiceAccountName" -}}
{{- default (include "gpudra.webhookName" .) .Values.admissionWebhook.serviceAccount.name -}}
{{- end -}}

{{/* The Secret with the webhook's serving certificate: kept by the webhook's leader, or by cert-manager. */}}
{{- define "gpudra.webhookCertSecret" -}}
{{- printf "%s-cert" (include "gpudra.webhookName" .) -}}
{{- end -}}

{{/*
What the pods of the controller's two Deployments (fleet accounting, the
webhook) share: placement (the controller.* values), replicas spread over
nodes, no privilege. Call with (list . "<selector labels template>").
*/}}
{{- define "gpudra.controllerPodPlacement" -}}
{{- $ := index . 0 -}}
{{- $selector := index . 1 -}}
{{- with $.Values.controller.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $.Values.controller.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
affinity:
  {{- if $.Values.controller.affinity }}
  {{- toYaml $.Values.controller.affinity | nindent 2 }}
  {{- else }}
  # Replicas on different nodes where possible, so that one node going
  # down leaves one answering.
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include $selector $ | nindent 12 }}
  {{- end }}
{{- with $.Values.controller.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
# It needs no privilege, capability or host path: it talks to the API
# server and serves HTTP(S).
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{/*
The environment of gpudra-controller's containers: its pod's name and
namespace (leader election, the certificate Secret) and its memory limit in
bytes, which --memory-limit-ratio turns into the Go runtime's soft limit.
*/}}
{{- define "gpudra.controllerEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: MEMORY_LIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
{{- end -}}

{{- define "gpudra.controllerContainerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "gpudra.webhookEnabled" -}}
{{- if and .Values.controller.enabled .Values.admissionWebhook.enabled }}true{{ end -}}
{{- end -}}

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

{{/* The Secret with the webhook's serving certificate: kept by the controller, or by cert-manager. */}}
{{- define "gpudra.webhookCertSecret" -}}
{{- printf "%s-webhook-cert" (include "gpudra.controllerName" .) -}}
{{- end -}}

{{- define "gpudra.webhookEnabled" -}}
{{- if and .Values.controller.enabled .Values.admissionWebhook.enabled }}true{{ end -}}
{{- end -}}

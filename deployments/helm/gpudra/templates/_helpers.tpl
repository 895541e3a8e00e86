{{/* Chart name and release-scoped names. */}}
{{- define "gpudra.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gpudra.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gpudra.pluginSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
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

{{/* --feature-gates value: A=true,B=false, sorted. */}}
{{- define "gpudra.featureGates" -}}
{{- $gates := list -}}
{{- range $k, $v := .Values.featureGates -}}
{{- $gates = append $gates (printf "%s=%t" $k $v) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}

{{/*
The plugin's node affinity: the user's affinity if set; otherwise GPU nodes
(any of gpuNodeLabels = "true"), and not control-plane nodes unless
runOnControlPlane. Each nodeSelectorTerm is ORed, so every term carries the
control-plane exclusion.
*/}}
{{- define "gpudra.pluginAffinity" -}}
{{- if .Values.kubeletPlugin.affinity -}}
{{- toYaml .Values.kubeletPlugin.affinity -}}
{{- else -}}
{{- $notControlPlane := list -}}
{{- if not .Values.kubeletPlugin.runOnControlPlane -}}
{{- $notControlPlane = list (dict "key" "node-role.kubernetes.io/control-plane" "operator" "DoesNotExist") (dict "key" "node-role.kubernetes.io/master" "operator" "DoesNotExist") -}}
{{- end -}}
{{- $terms := list -}}
{{- range .Values.kubeletPlugin.gpuNodeLabels -}}
{{- $terms = append $terms (dict "matchExpressions" (prepend $notControlPlane (dict "key" . "operator" "In" "values" (list "true")))) -}}
{{- end -}}
{{- if and (not $terms) $notControlPlane -}}
{{- $terms = list (dict "matchExpressions" $notControlPlane) -}}
{{- end -}}
{{- if $terms -}}
nodeAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
    {{- toYaml $terms | nindent 4 }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Whether the plugin container runs privileged: only the nvml backend may. */}}
{{- define "gpudra.pluginPrivileged" -}}
{{- and (eq .Values.deviceBackend "nvml") .Values.kubeletPlugin.privileged -}}
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
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
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

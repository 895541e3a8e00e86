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

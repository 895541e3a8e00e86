{{/*
The kubelet plugin's environment for GPU sharing (docs/sharing.md):
consumable capacity, and what it needs to run MPS control daemon pods (its
namespace and its own image; with real GPUs the daemon pods also mount the
driver root on the host, HOST_DRIVER_ROOT, which the plugin has anyway).
*/}}
{{- define "gpudra.sharingEnv" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- if .Values.consumableCapacity.enabled }}
- name: CONSUMABLE_CAPACITY
  value: "true"
- name: CONSUMABLE_CAPACITY_SHARING
  value: {{ .Values.consumableCapacity.sharing | quote }}
{{- end }}
{{- if .Values.mps.enabled }}
- name: MPS_DAEMON_IMAGE
  value: {{ include "gpudra.image" . | quote }}
- name: MPS_DAEMON_IMAGE_PULL_POLICY
  value: {{ .Values.image.pullPolicy | quote }}
{{- with .Values.imagePullSecrets }}
- name: MPS_DAEMON_IMAGE_PULL_SECRETS
  value: {{ join "," (pluck "name" .) | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The directory of the MPS daemons, under the plugin data dir. */}}
{{- define "gpudra.mpsDir" -}}
{{- printf "%s/plugins/%s/mps" (trimSuffix "/" .Values.kubeletDir) .Values.driverName -}}
{{- end -}}

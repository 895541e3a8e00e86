{{/*
A pool's kubelet plugin environment for GPU sharing (docs/sharing.md):
consumable capacity, and what it needs to run MPS control daemon pods (its
namespace and its own image; with real GPUs the daemon pods also mount the
driver root on the host, HOST_DRIVER_ROOT, which the plugin has anyway).
Called with (dict "root" $ "pool" $pool).
*/}}
{{- define "gpudra.sharingEnv" -}}
{{- $v := .root.Values -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- if .pool.consumableCapacity.enabled }}
- name: CONSUMABLE_CAPACITY
  value: "true"
- name: CONSUMABLE_CAPACITY_SHARING
  value: {{ .pool.consumableCapacity.sharing | quote }}
{{- end }}
{{- if $v.mps.enabled }}
- name: MPS_DAEMON_IMAGE
  value: {{ include "gpudra.image" .root | quote }}
- name: MPS_DAEMON_IMAGE_PULL_POLICY
  value: {{ $v.image.pullPolicy | quote }}
{{- with $v.imagePullSecrets }}
- name: MPS_DAEMON_IMAGE_PULL_SECRETS
  value: {{ join "," (pluck "name" .) | quote }}
{{- end }}
{{- end }}
{{- end -}}

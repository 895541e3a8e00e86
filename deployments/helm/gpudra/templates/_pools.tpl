{{/*
Node pools (values nodePools): one kubelet plugin DaemonSet per pool, with
one controller, one webhook and one set of DeviceClasses for the release.

A pool is the plugin's values of the top level with the pool's own on top:
each key a pool sets replaces the top-level one, and kubeletPlugin and
consumableCapacity are merged one key deep (a pool's
kubeletPlugin.nodeSelector replaces the top-level nodeSelector, its
kubeletPlugin.resources the top-level resources). With no nodePools the
release has one pool, named "", from the top-level values alone: the
DaemonSet, its selector and every name are those of a release without
pools.
*/}}

{{/* The values a pool may set. */}}
{{- define "gpudra.poolKeys" -}}
{{- toJson (list "fakeProfile" "fakeProfileFile" "fakeStateDir" "driverRoot" "cdiHookDir" "migProfiles" "migSpareGPUs" "deviceMetadata" "kubeletDir" "cdiDir" "featureGates" "logVerbosity" "consumableCapacity" "kubeletPlugin") -}}
{{- end -}}

{{/* The release's pools, as a JSON list (include "gpudra.pools" . | fromJsonArray). */}}
{{- define "gpudra.pools" -}}
{{- $base := dict "name" "" -}}
{{- range $k := include "gpudra.poolKeys" . | fromJsonArray -}}
{{- $_ := set $base $k (index $.Values $k) -}}
{{- end -}}
{{- $pools := list -}}
{{- range $p := .Values.nodePools -}}
{{- $pool := deepCopy $base -}}
{{- range $k, $v := $p -}}
{{- if and (has $k (list "kubeletPlugin" "consumableCapacity")) (kindIs "map" $v) -}}
{{- $merged := deepCopy (index $base $k) -}}
{{- range $kk, $vv := $v }}{{ $_ := set $merged $kk $vv }}{{ end -}}
{{- $_ := set $pool $k $merged -}}
{{- else -}}
{{- $_ := set $pool $k $v -}}
{{- end -}}
{{- end -}}
{{- $pools = append $pools $pool -}}
{{- end -}}
{{- if not $pools }}{{ $pools = list $base }}{{ end -}}
{{- include "gpudra.checkPools" $pools -}}
{{- toJson $pools -}}
{{- end -}}

{{/*
Two plugins of one driver on one node would publish the same pool of
ResourceSlices and fight over them, and share one checkpoint. Pools must
therefore select disjoint nodes, which the chart can prove only from
nodeSelectors: every two pools must give one label key different values.
*/}}
{{- define "gpudra.checkPools" -}}
{{- range $i, $a := . -}}
{{- range $j, $b := $ -}}
{{- if lt $i $j -}}
{{- if eq $a.name $b.name -}}
{{- fail (printf "nodePools: two pools are named %q; each pool needs a name of its own" $a.name) -}}
{{- end -}}
{{- $sa := $a.kubeletPlugin.nodeSelector | default dict -}}
{{- $sb := $b.kubeletPlugin.nodeSelector | default dict -}}
{{- $disjoint := false -}}
{{- range $k, $v := $sa -}}
{{- if and (hasKey $sb $k) (ne (toString $v) (toString (index $sb $k))) }}{{ $disjoint = true }}{{ end -}}
{{- end -}}
{{- if not $disjoint -}}
{{- fail (printf "nodePools %q and %q may run on the same node: give both a kubeletPlugin.nodeSelector with one label key and different values (e.g. gpudra.io/node-pool: %s and gpudra.io/node-pool: %s). Two plugins of one driver on one node would fight over its ResourceSlices" $a.name $b.name $a.name $b.name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A pool's DaemonSet (and pod name prefix): the release's plugin name, then the pool's. */}}
{{- define "gpudra.poolName" -}}
{{- $name := include "gpudra.pluginName" .root -}}
{{- if .pool.name }}{{ printf "%s-%s" $name .pool.name }}{{ else }}{{ $name }}{{ end -}}
{{- end -}}

{{/* A pool's DaemonSet selector: every plugin pod's labels, and the pool's name. */}}
{{- define "gpudra.poolSelectorLabels" -}}
{{ include "gpudra.pluginSelectorLabels" .root }}
{{- with .pool.name }}
gpudra.io/node-pool: {{ . }}
{{- end }}
{{- end -}}

{{/* A pool's plugin data directory: the kubelet's convention, <kubeletDir>/plugins/<driverName>, on each node of the pool. */}}
{{- define "gpudra.poolDataDir" -}}
{{- printf "%s/plugins/%s" (trimSuffix "/" .pool.kubeletDir) .root.Values.driverName -}}
{{- end -}}

{{/* --feature-gates value of a pool: A=true,B=false, sorted. */}}
{{- define "gpudra.featureGates" -}}
{{- $gates := list -}}
{{- range $k, $v := .featureGates -}}
{{- $gates = append $gates (printf "%s=%t" $k $v) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}

{{/*
A pool's node affinity (from its kubeletPlugin values): the affinity if set;
otherwise GPU nodes (any of gpuNodeLabels = "true"), and not control-plane
nodes unless runOnControlPlane. Each nodeSelectorTerm is ORed, so every
term carries the control-plane exclusion.
*/}}
{{- define "gpudra.pluginAffinity" -}}
{{- if .affinity -}}
{{- toYaml .affinity -}}
{{- else -}}
{{- $notControlPlane := list -}}
{{- if not .runOnControlPlane -}}
{{- $notControlPlane = list (dict "key" "node-role.kubernetes.io/control-plane" "operator" "DoesNotExist") (dict "key" "node-role.kubernetes.io/master" "operator" "DoesNotExist") -}}
{{- end -}}
{{- $terms := list -}}
{{- range .gpuNodeLabels -}}
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

{{/* Whether a pool's plugin container runs privileged: only the nvml backend may. */}}
{{- define "gpudra.pluginPrivileged" -}}
{{- and (eq .root.Values.deviceBackend "nvml") .pool.kubeletPlugin.privileged -}}
{{- end -}}

{{/* The MPS daemons' directory of a pool, under its plugin data dir. */}}
{{- define "gpudra.mpsDir" -}}
{{- printf "%s/mps" (include "gpudra.poolDataDir" .) -}}
{{- end -}}

//go:build chart

/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package chart

import (
	"fmt"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/deviceclasses"
)

// podTemplate is the pod template of a DaemonSet or Deployment.
func podTemplate(o object) object {
	m, _ := o.get("spec", "template").(map[string]any)
	return m
}

// containers lists a pod template's init containers and containers.
func containers(pod object) []object {
	var out []object
	for _, key := range []string{"initContainers", "containers"} {
		list, _ := pod.get("spec", key).([]any)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// env is a container's environment, by name (plain values only).
func env(c object) map[string]string {
	out := map[string]string{}
	list, _ := c["env"].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		name, _ := m["name"].(string)
		value, _ := m["value"].(string)
		out[name] = value
	}
	return out
}

// stringMap converts a rendered map of strings.
func stringMap(v any) map[string]string {
	out := map[string]string{}
	m, _ := v.(map[string]any)
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// selects tells whether a matchLabels selector selects labels.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// everything renders the chart with every optional part on.
func everything(t *testing.T, args ...string) []object {
	t.Helper()
	return objects(t, render(t, append([]string{"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true",
		"--set", "metrics.grafanaDashboard.enabled=true", "--set", "networkPolicies.enabled=true", "--set", "networkPolicies.apiServer[0].ipBlock.cidr=10.0.0.10/32", "--set", "configPolicy.enabled=true",
		"--set", "admissionWebhook.certManager.enabled=true"}, args...)...))
}

// TestSinglePoolUnchanged: without nodePools the release renders the one
// DaemonSet it rendered before pools existed: same name, same (immutable)
// selector, same data directory, so helm upgrade keeps working.
func TestSinglePoolUnchanged(t *testing.T) {
	objs := objects(t, render(t))
	ds := ofKind(objs, "DaemonSet")
	plugin, ok := ds["gpudra-kubelet-plugin"]
	if len(ds) != 1 || !ok {
		t.Fatalf("DaemonSets %v, want only gpudra-kubelet-plugin", slices.Collect(maps.Keys(ds)))
	}
	want := map[string]string{"app.kubernetes.io/name": "gpudra", "app.kubernetes.io/instance": release, "app.kubernetes.io/component": "kubelet-plugin"}
	if got := stringMap(plugin.get("spec", "selector", "matchLabels")); !maps.Equal(got, want) {
		t.Errorf("selector %v, want %v (a DaemonSet's selector cannot change on upgrade)", got, want)
	}
	for _, c := range containers(podTemplate(plugin)) {
		if c["name"] == "plugin" && env(c)["PLUGIN_DATA_DIR"] != "/var/lib/kubelet/plugins/gpu.gpudra.io" {
			t.Errorf("PLUGIN_DATA_DIR %q", env(c)["PLUGIN_DATA_DIR"])
		}
	}
	if _, ok := podTemplate(plugin).labels()["gpudra.io/node-pool"]; ok {
		t.Error("the single pool's pods carry a node-pool label")
	}
	// The plugin records Events on its Node (an IMEX daemon not ready, a
	// fabric not usable) whatever the values.
	if _, ok := ofKind(objs, "ClusterRoleBinding")["gpudra-kubelet-plugin-events"]; !ok {
		t.Error("with the default values the plugin may not record Events on its Node")
	}
}

// TestNodePools: one release, three pools: a DaemonSet per pool with its
// own nodes and values, selectors that never take another pool's pods,
// one controller, one webhook, one set of DeviceClasses, one metrics
// Service for all.
func TestNodePools(t *testing.T) {
	objs := objects(t, render(t, "-f", "testdata/values/pools.yaml", "--set", "metrics.prometheusRule.enabled=true"))
	ds := ofKind(objs, "DaemonSet")
	if got := slices.Sorted(maps.Keys(ds)); !slices.Equal(got, []string{"gpudra-kubelet-plugin-edge", "gpudra-kubelet-plugin-inference", "gpudra-kubelet-plugin-training"}) {
		t.Fatalf("DaemonSets %v, want one per pool", got)
	}
	type want struct {
		nodeSelector map[string]string
		env          map[string]string
		cpu          string
	}
	for name, w := range map[string]want{
		"training": {map[string]string{"gpudra.io/node-pool": "training"},
			map[string]string{"FAKE_PROFILE": "dgx-h100", "MIG_PROFILES": "none", "DEVICE_METADATA": "true", "CONSUMABLE_CAPACITY": "",
				"PLUGIN_DATA_DIR": "/var/lib/kubelet/plugins/gpu.gpudra.io"}, "10m"},
		"inference": {map[string]string{"gpudra.io/node-pool": "inference"},
			map[string]string{"FAKE_PROFILE": "dgx-a100", "MIG_PROFILES": "1g.10gb,3g.40gb", "DEVICE_METADATA": "false",
				"CONSUMABLE_CAPACITY": "true", "CONSUMABLE_CAPACITY_SHARING": "TimeSlicing"}, "20m"},
		"edge": {map[string]string{"gpudra.io/node-pool": "edge", "kubernetes.io/arch": "arm64"},
			map[string]string{"FAKE_PROFILE": "mixed", "MIG_PROFILES": "all", "PLUGIN_DATA_DIR": "/var/lib/k0s/kubelet/plugins/gpu.gpudra.io",
				"REGISTRAR_DIR": "/var/lib/k0s/kubelet/plugins_registry"}, "10m"},
	} {
		d := ds["gpudra-kubelet-plugin-"+name]
		pod := podTemplate(d)
		if got := stringMap(pod.get("spec", "nodeSelector")); !maps.Equal(got, w.nodeSelector) {
			t.Errorf("pool %s: nodeSelector %v, want %v", name, got, w.nodeSelector)
		}
		for _, c := range containers(pod) {
			if c["name"] != "plugin" {
				continue
			}
			e := env(c)
			for k, v := range w.env {
				if e[k] != v {
					t.Errorf("pool %s: %s=%q, want %q", name, k, e[k], v)
				}
			}
			if got := object(c).str("resources", "requests", "cpu"); got != w.cpu {
				t.Errorf("pool %s: cpu request %q, want %q", name, got, w.cpu)
			}
		}
		if podTemplate(d).labels()["gpudra.io/node-pool"] != name {
			t.Errorf("pool %s: pods lack gpudra.io/node-pool=%s", name, name)
		}
	}
	// A DaemonSet's selector must not take another pool's pods (they
	// would be adopted and deleted), and the metrics Service must select
	// every pool's.
	svc := ofKind(objs, "Service")["gpudra-kubelet-plugin-metrics"]
	for a, da := range ds {
		sel := stringMap(da.get("spec", "selector", "matchLabels"))
		for b, db := range ds {
			labels := stringMap(podTemplate(db).get("metadata", "labels"))
			if got := selects(sel, labels); got != (a == b) {
				t.Errorf("the selector of %s selects the pods of %s: %v", a, b, got)
			}
			if !selects(stringMap(svc.get("spec", "selector")), labels) {
				t.Errorf("the metrics Service does not select the pods of %s", b)
			}
		}
	}
	// One of everything else: the controller and the webhook in a
	// Deployment each, with a ServiceAccount each, beside the plugin's.
	for kind, n := range map[string]int{"Deployment": 2, "ValidatingWebhookConfiguration": 1, "ServiceAccount": 3, "PrometheusRule": 1} {
		if got := len(ofKind(objs, kind)); got != n {
			t.Errorf("%d %ss, want %d", got, kind, n)
		}
	}
	classes := ofKind(objs, "DeviceClass")
	if len(classes) == 0 {
		t.Error("no DeviceClasses")
	}
	if _, ok := ofKind(objs, "ClusterRole")["gpudra-kubelet-plugin-events"]; !ok {
		t.Error("the plugin may not record Events on its Node")
	}
	// The MPS policy admits the daemon pods of every pool's data directory.
	vap := ofKind(objs, "ValidatingAdmissionPolicy")["gpudra-kubelet-plugin-mps-pods"]
	text := fmt.Sprint(vap["spec"])
	for _, dir := range []string{"/var/lib/kubelet/plugins/gpu.gpudra.io/mps/", "/var/lib/k0s/kubelet/plugins/gpu.gpudra.io/mps/"} {
		if !strings.Contains(text, dir) {
			t.Errorf("the MPS pod policy does not admit daemons under %s", dir)
		}
	}
}

// TestNodePoolsRefused: pools that could share a node, or a name, are
// refused with an error that says how to fix them.
func TestNodePoolsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no node selectors", []string{"--set", "nodePools[0].name=a", "--set", "nodePools[1].name=b"}, `nodePools "a" and "b" may run on the same node`},
		{"different keys", []string{"--set", "nodePools[0].name=a", "--set", "nodePools[1].name=b",
			"--set-string", "nodePools[0].kubeletPlugin.nodeSelector.x=1", "--set-string", "nodePools[1].kubeletPlugin.nodeSelector.y=1"},
			`nodePools "a" and "b" may run on the same node`},
		{"same value", []string{"--set", "nodePools[0].name=a", "--set", "nodePools[1].name=b",
			"--set-string", "nodePools[0].kubeletPlugin.nodeSelector.x=1", "--set-string", "nodePools[1].kubeletPlugin.nodeSelector.x=1"},
			`nodePools "a" and "b" may run on the same node`},
		{"same name", []string{"--set", "nodePools[0].name=a", "--set", "nodePools[1].name=a",
			"--set-string", "nodePools[0].kubeletPlugin.nodeSelector.x=1", "--set-string", "nodePools[1].kubeletPlugin.nodeSelector.x=2"},
			`two pools are named "a"`},
		{"no name", []string{"--set", "nodePools[0].migProfiles=none"}, "name"},
		{"unknown value", []string{"--set", "nodePools[0].name=a", "--set", "nodePools[0].controller.replicas=3"}, "controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderErr(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// standardLabels are on every object the chart renders.
var standardLabels = []string{"helm.sh/chart", "app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
	"app.kubernetes.io/managed-by", "app.kubernetes.io/part-of"}

// TestChartConventions: the standard labels on every object (DeviceClasses
// too), requests on every container, nameOverride and fullnameOverride.
func TestChartConventions(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		prefix     string
		appName    string
		deployment string
	}{
		{"defaults", nil, "gpudra-", "gpudra", "gpudra-controller"},
		{"nameOverride", []string{"--set", "nameOverride=gpus"}, "gpudra-gpus-", "gpus", "gpudra-gpus-controller"},
		{"fullnameOverride", []string{"--set", "fullnameOverride=dra"}, "dra-", "gpudra", "dra-controller"},
		{"node pools", []string{"-f", "testdata/values/pools.yaml"}, "gpudra-", "gpudra", "gpudra-controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := everything(t, tc.args...)
			for _, o := range objs {
				labels := o.labels()
				for _, l := range standardLabels {
					if _, ok := labels[l]; !ok {
						t.Errorf("%s %s lacks the label %s", o.kind(), o.name(), l)
					}
				}
				if labels["app.kubernetes.io/name"] != tc.appName {
					t.Errorf("%s %s: app.kubernetes.io/name=%v, want %s", o.kind(), o.name(), labels["app.kubernetes.io/name"], tc.appName)
				}
				// DeviceClasses are named after the driver, not the release.
				if o.kind() != "DeviceClass" && !strings.HasPrefix(o.name()+"-", tc.prefix) {
					t.Errorf("%s %s is not named %s...", o.kind(), o.name(), tc.prefix)
				}
				if pod := podTemplate(o); pod != nil {
					for _, c := range containers(pod) {
						for _, r := range []string{"cpu", "memory"} {
							if c.str("resources", "requests", r) == "" {
								t.Errorf("%s %s: container %v requests no %s", o.kind(), o.name(), c["name"], r)
							}
						}
					}
				}
			}
			if _, ok := ofKind(objs, "Deployment")[tc.deployment]; !ok {
				t.Errorf("no Deployment %s", tc.deployment)
			}
		})
	}
}

// TestNetworkPolicies: off by default; on, the plugin pods of every pool
// take only scrapes (from metricsFrom) and probes, the controller scrapes,
// the webhook the API server (apiServer) and scrapes, the MPS daemons
// nothing.
func TestNetworkPolicies(t *testing.T) {
	if n := len(ofKind(objects(t, render(t)), "NetworkPolicy")); n != 0 {
		t.Errorf("%d NetworkPolicies by default", n)
	}
	objs := objects(t, render(t, "-f", "testdata/values/pools.yaml", "--set", "networkPolicies.enabled=true",
		"--set", "networkPolicies.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring",
		"--set", "networkPolicies.apiServer[0].ipBlock.cidr=10.0.0.10/32"))
	policies := ofKind(objs, "NetworkPolicy")
	plugin, ok := policies["gpudra-kubelet-plugin"]
	if !ok {
		t.Fatalf("no NetworkPolicy for the plugin: %v", slices.Collect(maps.Keys(policies)))
	}
	text := fmt.Sprint(plugin["spec"])
	for _, s := range []string{"port:metrics", "port:healthcheck", "name:monitoring", "policyTypes:[Ingress]"} {
		if !strings.Contains(text, s) {
			t.Errorf("the plugin's NetworkPolicy lacks %s: %s", s, text)
		}
	}
	sel := stringMap(plugin.get("spec", "podSelector", "matchLabels"))
	for name, d := range ofKind(objs, "DaemonSet") {
		if !selects(sel, stringMap(podTemplate(d).get("metadata", "labels"))) {
			t.Errorf("the plugin's NetworkPolicy does not select the pods of %s", name)
		}
	}
	// The webhook's port takes the API server alone; the controller's
	// metrics port, scrapes.
	webhook := fmt.Sprint(policies["gpudra-webhook"]["spec"])
	for _, s := range []string{"port:webhook", "cidr:10.0.0.10/32", "port:metrics", "name:monitoring"} {
		if !strings.Contains(webhook, s) {
			t.Errorf("the webhook's NetworkPolicy lacks %s: %s", s, webhook)
		}
	}
	if controller := fmt.Sprint(policies["gpudra-controller"]["spec"]); !strings.Contains(controller, "port:metrics") || strings.Contains(controller, "webhook") {
		t.Errorf("the controller's NetworkPolicy: %s", controller)
	}
	mps := policies["gpudra-kubelet-plugin-mps-daemons"]
	if got := fmt.Sprint(mps.get("spec", "policyTypes")); got != "[Ingress Egress]" || mps.get("spec", "ingress") != nil || mps.get("spec", "egress") != nil {
		t.Errorf("the MPS daemons' NetworkPolicy lets traffic through: %v", mps["spec"])
	}
}

// sourceClasses reads the DeviceClasses of deviceclasses/, by name, with
// the driver name replaced as the chart replaces it.
func sourceClasses(t *testing.T, driverName string) map[string]object {
	t.Helper()
	files, err := fs.Glob(deviceclasses.FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var all []object
	for _, f := range files {
		raw, err := fs.ReadFile(deviceclasses.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, objects(t, strings.ReplaceAll(string(raw), "gpu.gpudra.io", driverName))...)
	}
	return ofKind(all, "DeviceClass")
}

// TestDeviceClassesRendered: the chart installs the DeviceClasses of
// deviceclasses/ as they are (the ones gpudra check and simulate read),
// with its labels; with another driverName, every driver name, class
// name and attribute domain follows it and the extended resource names
// stay with the default driver.
func TestDeviceClassesRendered(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		driverName string
		// className maps a source class's name to the rendered one.
		className func(string) string
		extended  bool
	}{
		{"default", nil, "gpu.gpudra.io", func(n string) string { return n }, true},
		{"no extended resource names", []string{"--set", "deviceClasses.extendedResourceNames=false"}, "gpu.gpudra.io",
			func(n string) string { return n }, false},
		{"another driver name", []string{"--set", "driverName=gpu.example.com"}, "gpu.example.com",
			func(n string) string {
				if n == "gpu.example.com" {
					return n
				}
				return strings.TrimSuffix(n, ".gpudra.io") + ".gpu.example.com"
			}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ofKind(objects(t, render(t, append(tc.args, "--set", "controller.nvlinkChannels=4")...)), "DeviceClass")
			want := sourceClasses(t, tc.driverName)
			if len(got) != len(want) {
				t.Errorf("%d DeviceClasses rendered, want the %d of deviceclasses/", len(got), len(want))
			}
			extended := 0
			for name, src := range want {
				c, ok := got[tc.className(name)]
				if !ok {
					t.Errorf("class %s of deviceclasses/ is not rendered as %s", name, tc.className(name))
					continue
				}
				spec, _ := c.get("spec").(map[string]any)
				srcSpec, _ := src.get("spec").(map[string]any)
				if _, has := spec["extendedResourceName"]; has {
					extended++
				}
				if !tc.extended {
					srcSpec = maps.Clone(srcSpec)
					delete(srcSpec, "extendedResourceName")
				}
				if !reflect.DeepEqual(spec, srcSpec) {
					t.Errorf("class %s: spec\n%v\nwant deviceclasses/'s\n%v", c.name(), spec, srcSpec)
				}
				for _, l := range standardLabels {
					if _, ok := c.labels()[l]; !ok {
						t.Errorf("class %s lacks label %s", c.name(), l)
					}
				}
			}
			if tc.extended != (extended > 0) {
				t.Errorf("%d classes with an extendedResourceName, want them: %v", extended, tc.extended)
			}
			if tc.driverName != "gpu.gpudra.io" {
				for _, c := range got {
					if text := fmt.Sprint(c); strings.Contains(strings.ReplaceAll(text, "resource.gpudra.io/", ""), "gpudra.io") {
						t.Errorf("class %s still names gpudra.io: %s", c.name(), text)
					}
				}
			}
		})
	}
}

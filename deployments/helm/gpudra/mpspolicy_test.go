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
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpudratest/policycel"
	"github.com/gpudra/gpudra/internal/mps"
	"github.com/gpudra/gpudra/internal/mpspod"
)

// The admission policy for MPS daemon pods
// (templates/mps-validatingadmissionpolicy.yaml) is what keeps a stolen
// plugin token from running anything but a daemon on its own node.
// TestMPSPodPolicy renders it as installed, evaluates it with the API
// server's CEL environment against the pods the plugin's launcher creates,
// which must pass, and against pods an attacker would create with the
// plugin's rights, which must not. (Before, the policy checked neither the
// command, nor added capabilities, nor privilege escalation.)

const (
	pluginSA = "gpudra-kubelet-plugin"
	mpsDir   = "/var/lib/kubelet/plugins/gpu.gpudra.io/mps"
)

// admit evaluates the policy for the plugin of node creating pod, and
// returns the messages of the validations that deny it (none: admitted).
func admit(t *testing.T, vap *admissionregistrationv1.ValidatingAdmissionPolicy, pod *v1.Pod) []string {
	t.Helper()
	env := policycel.Env(t)
	eval := func(expr string, act map[string]any) any {
		t.Helper()
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%v\n%s", iss.Err(), expr)
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(act)
		if err != nil {
			t.Fatalf("%v\n%s", err, expr)
		}
		return out.Value()
	}
	data, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{}
	act := map[string]any{
		"object":    obj,
		"oldObject": nil,
		"request": map[string]any{
			"operation": "CREATE",
			"userInfo": map[string]any{
				"username": "system:serviceaccount:" + namespace + ":" + pluginSA,
				"extra":    map[string]any{"authentication.kubernetes.io/node-name": []any{pod.Spec.NodeName}},
			},
		},
		"variables": vars,
	}
	for _, m := range vap.Spec.MatchConditions {
		if eval(m.Expression, act) != true {
			t.Fatalf("match condition %s does not match the plugin", m.Name)
		}
	}
	for _, v := range vap.Spec.Variables {
		vars[v.Name] = eval(v.Expression, act)
	}
	var denied []string
	for _, v := range vap.Spec.Validations {
		if eval(v.Expression, act) != true {
			denied = append(denied, strings.TrimSpace(v.Message+v.MessageExpression))
		}
	}
	return denied
}

// mpsPolicy renders the chart for a device backend and returns its MPS pod
// policy and the plugin's image.
func mpsPolicy(t *testing.T, backend string) (*admissionregistrationv1.ValidatingAdmissionPolicy, string) {
	t.Helper()
	objs := objects(t, render(t, "--set", "deviceBackend="+backend))
	var image string
	for _, c := range containers(podTemplate(ofKind(objs, "DaemonSet")["gpudra-kubelet-plugin"])) {
		if c.str("name") == "plugin" {
			image = c.str("image")
		}
	}
	policy, ok := ofKind(objs, "ValidatingAdmissionPolicy")["gpudra-kubelet-plugin-mps-pods"]
	if !ok || image == "" {
		t.Fatalf("the %s backend renders no MPS pod policy, or no plugin image", backend)
	}
	data, err := yaml.Marshal(policy)
	if err != nil {
		t.Fatal(err)
	}
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := yaml.UnmarshalStrict(data, &vap); err != nil {
		t.Fatal(err)
	}
	return &vap, image
}

// daemonPod is the pod the plugin's launcher creates for the daemon.
func daemonPod(t *testing.T, image string, d mps.Daemon) *v1.Pod {
	t.Helper()
	client := fake.NewClientset()
	l, err := mpspod.New(mpspod.Config{Client: client, Namespace: namespace, NodeName: "node-a", DriverName: gpu.DefaultDriverName, Image: image, HostDriverRoot: "/"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	pod, err := client.CoreV1().Pods(namespace).Get(ctx, l.PodName(d.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func TestMPSPodPolicy(t *testing.T) {
	daemons := map[string]mps.Daemon{
		"fake": {ID: "gpu-3", Dir: mpsDir + "/gpu-3", Command: gpu.DaemonCommand{
			Args: []string{"/usr/bin/gpudra-kubelet-plugin", "fake-mps-control-daemon"}, Env: []string{"CUDA_VISIBLE_DEVICES=GPU-1"},
		}},
		"nvml": {ID: "gpu-3", Dir: mpsDir + "/gpu-3", Command: gpu.DaemonCommand{
			Args: []string{"/driver-root/usr/bin/nvidia-cuda-mps-control", "-f"}, Env: []string{"CUDA_VISIBLE_DEVICES=GPU-1"}, HostAccess: true,
		}},
	}
	for backend, d := range daemons {
		t.Run(backend, func(t *testing.T) {
			vap, image := mpsPolicy(t, backend)
			if denied := admit(t, vap, daemonPod(t, image, d)); len(denied) > 0 {
				t.Fatalf("the launcher's own pod is denied: %v", denied)
			}
			attacks := map[string]func(c *v1.Container){
				"another command of the image":   func(c *v1.Container) { c.Command = []string{"/usr/bin/gpudra-controller"} },
				"the daemon's command with args": func(c *v1.Container) { c.Args = []string{"--help"} },
				"another binary of the driver":   func(c *v1.Container) { c.Command = []string{"/driver-root/usr/bin/nvidia-smi"} },
				"added capabilities": func(c *v1.Container) {
					c.SecurityContext.Capabilities = &v1.Capabilities{Add: []v1.Capability{"SYS_ADMIN"}}
				},
			}
			if backend == "fake" {
				attacks["privilege escalation"] = func(c *v1.Container) {
					esc := true
					c.SecurityContext.AllowPrivilegeEscalation = &esc
				}
			}
			for name, attack := range attacks {
				pod := daemonPod(t, image, d)
				attack(&pod.Spec.Containers[0])
				if denied := admit(t, vap, pod); len(denied) == 0 {
					t.Errorf("%s: admitted", name)
				}
			}
		})
	}
}

//go:build e2e

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

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// pluginLeastPrivilege: the plugin pod the chart installed with the fake
// backend runs with no privilege (docs/security.md), as the API says and as
// the kernel says of its process, only on GPU nodes, never on control-plane
// nodes unless asked, and with its probes.
func (e *env) pluginLeastPrivilege(ctx context.Context, t *testing.T) {
	pod := e.readyPluginPod(ctx, t)
	c := pod.Spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("the plugin container has no securityContext")
	}
	if sc.Privileged == nil || *sc.Privileged {
		t.Error("the plugin container is privileged with the fake backend")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the root file system is not read-only")
	}
	if sc.Capabilities == nil || len(sc.Capabilities.Add) != 0 || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("capabilities %+v, want drop [ALL] and nothing added", sc.Capabilities)
	}
	if psc := pod.Spec.SecurityContext; psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != v1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccomp profile %+v, want RuntimeDefault", pod.Spec.SecurityContext)
	}
	if pod.Spec.HostNetwork || pod.Spec.HostPID || pod.Spec.HostIPC {
		t.Error("the plugin shares a host namespace")
	}
	for _, tol := range pod.Spec.Tolerations {
		if tol.Key == "" && tol.Operator == v1.TolerationOpExists {
			t.Errorf("the plugin tolerates every taint: %+v", tol)
		}
	}
	// The DaemonSet controller pins each pod to its node, replacing the
	// node affinity in the pod: the chart's is in the DaemonSet.
	ds, err := e.cs.AppsV1().DaemonSets(systemNS).Get(ctx, e.pluginDaemonSet(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	affinity := fmt.Sprintf("%+v", ds.Spec.Template.Spec.Affinity)
	for _, want := range []string{"nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present"} {
		if !strings.Contains(affinity, want) {
			t.Errorf("node affinity does not ask for %s: %s", want, affinity)
		}
	}
	node, err := e.cs.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels["nvidia.com/gpu.present"] != "true" {
		t.Errorf("the plugin runs on node %s, which is not labelled a GPU node", node.Name)
	}
	for name, p := range map[string]*v1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.GRPC == nil {
			t.Errorf("no gRPC %s probe", name)
		}
	}
	if p := c.ReadinessProbe; p != nil && p.GRPC != nil && ptr.Deref(p.GRPC.Service, "") != "readiness" {
		t.Errorf("readiness probe asks service %q", ptr.Deref(p.GRPC.Service, ""))
	}

	// What the kernel says of the process: the API could be right and the
	// runtime ignore it.
	status, mounts := pluginProcess(t, string(pod.UID))
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(status, want) {
			t.Errorf("plugin process status lacks %q", want)
		}
	}
	rootRO := false
	for _, line := range strings.Split(mounts, "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" && strings.HasPrefix(f[5], "ro") {
			rootRO = true
		}
	}
	if !rootRO {
		t.Error("the plugin process's root file system is writable")
	}
}

// pluginProcess finds the plugin's process on this machine (the node, or the
// kind node container on the same kernel) by its pod UID in its cgroup, and
// returns its /proc status and mountinfo.
func pluginProcess(t *testing.T, podUID string) (status, mountinfo string) {
	t.Helper()
	pid := pluginPID(podUID)
	if pid == 0 {
		t.Fatalf("no gpudra-kubelet-plugin process of pod %s on this machine (the e2e suite runs on the node's kernel: make e2e-local or e2e-kind)", podUID)
	}
	dir := fmt.Sprintf("/proc/%d", pid)
	st, err1 := os.ReadFile(dir + "/status")
	mi, err2 := os.ReadFile(dir + "/mountinfo")
	if err1 != nil || err2 != nil {
		t.Fatalf("read %s: %v %v", dir, err1, err2)
	}
	return string(st), string(mi)
}

// pluginPID is the PID of the plugin process of the pod, found by the pod
// UID in its cgroup, or 0.
func pluginPID(podUID string) int {
	uids := []string{podUID, strings.ReplaceAll(podUID, "-", "_")}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		cmd, err := os.ReadFile(dir + "/cmdline")
		if err != nil || !strings.Contains(string(cmd), "gpudra-kubelet-plugin") {
			continue
		}
		cg, err := os.ReadFile(dir + "/cgroup")
		if err != nil || (!strings.Contains(string(cg), uids[0]) && !strings.Contains(string(cg), uids[1])) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(dir), "%d", &pid); err == nil {
			return pid
		}
	}
	return 0
}

// pluginRecoversFromLostSocket: deleting the plugin's DRA socket under it
// (a wiped directory, a cleanup script) makes it restart by itself, and
// pods get GPUs again. Before, the plugin ran on serving nobody.
func (e *env) pluginRecoversFromLostSocket(ctx context.Context, t *testing.T) {
	pod := e.readyPluginPod(ctx, t)
	restarts := pod.Status.ContainerStatuses[0].RestartCount
	socket := "dra-" + string(pod.UID) + ".sock"

	start := time.Now()
	janitor := e.gpuPod("socket-janitor")
	janitor.Spec.RestartPolicy = v1.RestartPolicyNever
	janitor.Spec.Containers[0].Command = []string{"rm", "/host/plugin/" + socket}
	janitor.Spec.Volumes = []v1.Volume{{Name: "plugin", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{
		Path: e.kubeletDir + "/plugins/" + e.driver, Type: ptr.To(v1.HostPathDirectory)}}}}
	janitor.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "plugin", MountPath: "/host/plugin"}}
	if _, err := e.cs.CoreV1().Pods(testNS).Create(ctx, janitor, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer e.deletePods(ctx, t, "socket-janitor")
	if err := poll(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
		p, err := e.cs.CoreV1().Pods(testNS).Get(ctx, "socket-janitor", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == v1.PodFailed {
			return false, fmt.Errorf("rm %s failed:\n%s", socket, e.describePod(ctx, "socket-janitor"))
		}
		return p.Status.Phase == v1.PodSucceeded, nil
	}); err != nil {
		t.Fatal(err)
	}

	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := e.cs.CoreV1().Pods(systemNS).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return podReady(p) && p.Status.ContainerStatuses[0].RestartCount > restarts, nil
	}); err != nil {
		t.Fatalf("the plugin did not restart and become ready after its socket was deleted: %v", err)
	}
	record(t, "DRA socket deleted → plugin restarted and Ready", time.Since(start))

	e.createTemplate(ctx, t, "after-socket-loss", e.gpuRequest(1))
	e.startPod(ctx, t, e.gpuPod("after-socket-loss", claimRef{name: "gpu", template: "after-socket-loss"}))
	d := e.allocated(ctx, t, e.podClaims(ctx, t, "after-socket-loss")["gpu"])
	assertSees(t, "after-socket-loss", e.whatPodSees(ctx, t, "after-socket-loss"), d)
	e.deletePods(ctx, t, "after-socket-loss")
}

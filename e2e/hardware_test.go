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
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gpuResource is the device plugin's resource that the whole-GPU class
// maps (its extendedResourceName).
const gpuResource = "nvidia.com/gpu"

// nvidiaGPUExtendedResource: a pod spec from the device-plugin world,
// resources.limits nvidia.com/gpu: 1, gets one whole GPU through the
// scheduler's extended-resource claim, and sees exactly that GPU.
func (e *env) nvidiaGPUExtendedResource(ctx context.Context, t *testing.T) {
	pod := e.gpuPod("legacy-gpu")
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{gpuResource: resource.MustParse("1")}
	e.startPod(ctx, t, pod)
	defer e.deletePods(ctx, t, "legacy-gpu")

	p, err := e.cs.CoreV1().Pods(testNS).Get(ctx, "legacy-gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := p.Status.ExtendedResourceClaimStatus
	if st == nil || st.ResourceClaimName == "" {
		t.Fatalf("pod has no extended-resource claim: %+v", p.Status)
	}
	claim, err := e.cs.ResourceV1().ResourceClaims(testNS).Get(ctx, st.ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	devs := e.allocated(ctx, t, claim)
	if len(devs) != 1 || devs[0].uuid == "" {
		t.Fatalf("extended-resource claim %s got %+v, want one whole GPU", claim.Name, devs)
	}
	assertSees(t, "legacy-gpu", e.whatPodSees(ctx, t, "legacy-gpu"), devs)
}

// driverLibraries: a GPU container gets the driver's libraries from the
// CDI spec alone (no NVIDIA container runtime on this cluster), at the
// distribution's paths and named for the driver version NVML reports, and
// the ld cache hook ran in it: its drop-in names the library directory
// and the container's ld cache knows libcuda.so.1. It also finds its
// device's attributes where KEP-5304 puts them.
func (e *env) driverLibraries(ctx context.Context, t *testing.T) {
	version := e.driverVersion(ctx, t)
	lib := "/usr/lib/x86_64-linux-gnu"
	e.createTemplate(ctx, t, "libs", e.gpuRequest(1))
	pod := e.gpuPod("libs", claimRef{name: "gpu", template: "libs"})
	pod.Spec.Containers[0].Command = []string{"sh", "-c", strings.Join([]string{
		"ls " + lib + " | sed 's/^/LIB: /'",
		"cat /etc/ld.so.conf.d/*.conf | sed 's/^/LDCONF: /'",
		"grep -c libcuda.so.1 /etc/ld.so.cache | sed 's/^/LDCACHE: /'",
		"/usr/bin/nvidia-smi | sed 's/^/SMI: /'",
		"cat $(find /var/run/kubernetes.io/dra-device-attributes -name '*-metadata.json') | tr -d ' \\n' | sed 's/^/META: /'; echo",
		"echo READY", "exec sleep 3600",
	}, "; ")}
	e.startPod(ctx, t, pod)
	defer e.deletePods(ctx, t, "libs")
	out := e.podLines(ctx, t, "libs")
	for _, want := range []string{"libcuda.so." + version, "libnvidia-ml.so." + version, "libnvidia-ptxjitcompiler.so." + version, "libcuda.so.1", "libcuda.so"} {
		if !slices.Contains(out["LIB"], want) {
			t.Errorf("%s in the container holds %v, lacks %s", lib, out["LIB"], want)
		}
	}
	if slices.Contains(out["LIB"], "libnvidia-encode.so."+version) {
		t.Errorf("a video library is mounted without the video capability: %v", out["LIB"])
	}
	if !slices.Contains(out["LDCONF"], lib) {
		t.Errorf("the ld cache hook's drop-ins say %v, want %s", out["LDCONF"], lib)
	}
	if len(out["LDCACHE"]) != 1 || out["LDCACHE"][0] == "0" {
		t.Errorf("the container's ld cache does not know libcuda.so.1 (grep -c: %v)", out["LDCACHE"])
	}
	if len(out["SMI"]) == 0 || !strings.Contains(out["SMI"][0], version) {
		t.Errorf("nvidia-smi in the container printed %v", out["SMI"])
	}
	devs := e.allocated(ctx, t, e.podClaims(ctx, t, "libs")["gpu"])
	if len(out["META"]) != 1 || len(devs) != 1 || !strings.Contains(out["META"][0], `"uuid":{"string":"`+devs[0].uuid+`"}`) {
		t.Errorf("device metadata in the container: %v, want the attributes of %+v", out["META"], devs)
	}
}

// twoRequestsOneContainer: a container that uses two requests of one
// claim and a second claim sees all three GPUs (visibility is by device
// nodes, not by one NVIDIA_VISIBLE_DEVICES that the last device sets).
func (e *env) twoRequestsOneContainer(ctx context.Context, t *testing.T) {
	two := e.gpuRequest(1)
	second := two.Devices.Requests[0]
	second.Name = "gpu-b"
	two.Devices.Requests = append(two.Devices.Requests, second)
	e.createTemplate(ctx, t, "two-requests", two)
	e.createTemplate(ctx, t, "one-more", e.gpuRequest(1))
	pod := e.gpuPod("many", claimRef{name: "two", template: "two-requests"}, claimRef{name: "more", template: "one-more"})
	e.startPod(ctx, t, pod)
	defer e.deletePods(ctx, t, "many")
	claims := e.podClaims(ctx, t, "many")
	devs := append(e.allocated(ctx, t, claims["two"]), e.allocated(ctx, t, claims["more"])...)
	if len(devs) != 3 {
		t.Fatalf("allocated %+v, want three GPUs", devs)
	}
	assertSees(t, "many", e.whatPodSees(ctx, t, "many"), devs)
}

// driverVersion is the driver version the plugin publishes for the node.
func (e *env) driverVersion(ctx context.Context, t *testing.T) string {
	t.Helper()
	for _, d := range e.devicesByName(ctx, t) {
		if v := d.attrs["driverVersion"].VersionValue; v != nil {
			return *v
		}
	}
	t.Fatal("no device publishes a driverVersion")
	return ""
}

// podLines waits for the pod's READY and returns its log lines "KEY: value"
// by key.
func (e *env) podLines(ctx context.Context, t *testing.T, name string) map[string][]string {
	t.Helper()
	var logs string
	err := poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		b, err := e.cs.CoreV1().Pods(testNS).GetLogs(name, &v1.PodLogOptions{Container: "ctr"}).DoRaw(ctx)
		if err != nil {
			return false, err
		}
		logs = string(b)
		return strings.Contains(logs, "\nREADY"), nil
	})
	if err != nil {
		t.Fatalf("logs of pod %s: %v (got %q)", name, err, logs)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(logs, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			out[k] = append(out[k], v)
		}
	}
	return out
}

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

package mpspod

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/mps"
)

func newLauncher(t *testing.T, client *fake.Clientset, node string) *Launcher {
	t.Helper()
	l, err := New(Config{Client: client, Namespace: "gpudra", NodeName: node, DriverName: "gpu.gpudra.io",
		Image: "ghcr.io/gpudra/gpudra:dev", PullPolicy: v1.PullIfNotPresent, PriorityClassName: "system-node-critical", HostDriverRoot: "/run/nvidia/driver"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func daemon(uuid string, hostAccess bool) mps.Daemon {
	return mps.Daemon{ID: "gpu-3", Dir: "/var/lib/kubelet/plugins/gpu.gpudra.io/mps/gpu-3", Command: gpu.DaemonCommand{
		Args: []string{"/usr/bin/gpudra-kubelet-plugin", "fake-mps-control-daemon"}, Env: []string{"CUDA_VISIBLE_DEVICES=" + uuid}, HostAccess: hostAccess,
	}}
}

func creates(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			n++
		}
	}
	return n
}

func TestPodSpec(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	l := newLauncher(t, client, "node-a")
	d := daemon("GPU-1", false)
	if err := l.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	pod, err := client.CoreV1().Pods("gpudra").Get(ctx, l.PodName("gpu-3"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := pod.Spec
	c := s.Containers[0]
	if s.NodeName != "node-a" || ptr.Deref(s.AutomountServiceAccountToken, true) || s.HostPID || s.RestartPolicy != v1.RestartPolicyAlways {
		t.Errorf("pod spec: node %q, token %v, hostPID %v, restart %s", s.NodeName, s.AutomountServiceAccountToken, s.HostPID, s.RestartPolicy)
	}
	if ptr.Deref(c.SecurityContext.Privileged, true) || c.Image != "ghcr.io/gpudra/gpudra:dev" || !slices.Equal(c.Command, d.Command.Args) {
		t.Errorf("container: privileged %v, image %s, command %v", c.SecurityContext.Privileged, c.Image, c.Command)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["CUDA_MPS_PIPE_DIRECTORY"] != d.PipeDir() || env["CUDA_MPS_LOG_DIRECTORY"] != d.LogDir() || env["CUDA_VISIBLE_DEVICES"] != "GPU-1" {
		t.Errorf("env %v", env)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range s.Volumes {
			if v.Name == m.Name {
				mounts[m.MountPath] = v.HostPath.Path
			}
		}
	}
	if mounts[d.Dir] != d.Dir || mounts["/dev/shm"] != d.ShmDir() || len(mounts) != 2 {
		t.Errorf("mounts (container → host) %v: want the daemon's directory at the same path and its shm at /dev/shm, nothing else", mounts)
	}
	if pod.Labels[LabelComponent] != ComponentValue || pod.Labels["gpu.gpudra.io/mps-device"] != "gpu-3" {
		t.Errorf("labels %v", pod.Labels)
	}

	// The real daemon: privileged, host PIDs, the driver's usr/.
	real := daemon("GPU-1", true)
	pod = l.pod(real)
	if !pod.Spec.HostPID || !ptr.Deref(pod.Spec.Containers[0].SecurityContext.Privileged, false) {
		t.Error("the real daemon's pod is not privileged in the host's PID namespace")
	}
	if v := pod.Spec.Volumes[len(pod.Spec.Volumes)-1]; v.HostPath.Path != "/run/nvidia/driver/usr" {
		t.Errorf("driver volume %v", v.HostPath)
	}
}

// TestAdoptReplaceStop: a second Start (a restarted plugin) adopts the
// pod; a daemon for a device with a new UUID replaces it; Stop deletes it.
func TestAdoptReplaceStop(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	l := newLauncher(t, client, "node-a")
	if err := l.Start(ctx, daemon("GPU-1", false)); err != nil {
		t.Fatal(err)
	}
	again := newLauncher(t, client, "node-a")
	if err := again.Start(ctx, daemon("GPU-1", false)); err != nil {
		t.Fatal(err)
	}
	if n := creates(client); n != 1 {
		t.Errorf("%d pods created, want the first adopted", n)
	}
	if err := again.Start(ctx, daemon("MIG-2", false)); err != nil {
		t.Fatal(err)
	}
	if n := creates(client); n != 2 {
		t.Errorf("%d pods created, want the pod of the old device replaced", n)
	}
	pod, _ := client.CoreV1().Pods("gpudra").Get(ctx, l.PodName("gpu-3"), metav1.GetOptions{})
	if pod.Spec.Containers[0].Env[0].Value != "MIG-2" {
		t.Errorf("replacement runs %v", pod.Spec.Containers[0].Env)
	}

	// A failed pod is replaced too.
	pod.Status.Phase = v1.PodFailed
	if _, err := client.CoreV1().Pods("gpudra").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := again.Start(ctx, daemon("MIG-2", false)); err != nil {
		t.Fatal(err)
	}
	if n := creates(client); n != 3 {
		t.Errorf("%d pods created, want the failed pod replaced", n)
	}

	other := newLauncher(t, client, "node-b")
	if err := other.Start(ctx, daemon("GPU-9", false)); err != nil {
		t.Fatal(err)
	}
	if ids, err := l.List(ctx); err != nil || !slices.Equal(ids, []string{"gpu-3"}) {
		t.Errorf("List on node-a = %v, %v; want its one daemon", ids, err)
	}
	if err := l.Stop(ctx, daemon("", false)); err != nil {
		t.Fatal(err)
	}
	if ids, _ := l.List(ctx); len(ids) != 0 {
		t.Errorf("daemons %v after Stop", ids)
	}
	if err := l.Stop(ctx, daemon("", false)); err != nil {
		t.Errorf("stopping a stopped daemon: %v", err)
	}
	if ids, _ := other.List(ctx); len(ids) != 1 {
		t.Errorf("node-b's daemon was touched: %v", ids)
	}
}

func TestStartReportsAPIErrors(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(v1.Resource("pods"), "x", errors.New("denied by the admission policy"))
	})
	l := newLauncher(t, client, "node-a")
	err := l.Start(context.Background(), daemon("GPU-1", false))
	if err == nil || !strings.Contains(err.Error(), "denied by the admission policy") || !strings.Contains(err.Error(), "MPS daemon gpu-3") {
		t.Errorf("Start = %v", err)
	}
}

// TestKillDeletesAtOnce: a daemon pod that no longer answers is deleted
// with no grace period (it would not act on a SIGTERM), and Stop gives a
// daemon that does answer its grace period.
func TestKillDeletesAtOnce(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	l := newLauncher(t, client, "node-a")
	for _, stop := range []struct {
		name  string
		do    func(context.Context, mps.Daemon) error
		grace int64
	}{{"Kill", l.Kill, 0}, {"Stop", l.Stop, stopGracePeriod}} {
		if err := l.Start(ctx, daemon("GPU-1", false)); err != nil {
			t.Fatal(err)
		}
		client.ClearActions()
		if err := stop.do(ctx, daemon("GPU-1", false)); err != nil {
			t.Fatal(err)
		}
		var grace *int64
		for _, a := range client.Actions() {
			if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
				grace = d.GetDeleteOptions().GracePeriodSeconds
			}
		}
		if grace == nil || *grace != stop.grace {
			t.Errorf("%s deleted the pod with grace period %v, want %d", stop.name, grace, stop.grace)
		}
		if ids, _ := l.List(ctx); len(ids) != 0 {
			t.Errorf("%s: daemons %v left", stop.name, ids)
		}
	}
}

// TestStopWaitsForThePodToGo: Stop returns once the API server no longer
// has the pod, however many looks that takes; a pod still there after
// StopTimeout is an error that names it, and a caller's context that ends
// first is that context's error.
func TestStopWaitsForThePodToGo(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lingers is how many Gets still find the pod after its deletion
		// (-1: it never goes).
		lingers int
		cancel  bool
		timeout time.Duration // StopTimeout, 10 s unless set
		want    string
	}{
		{name: "gone at once"},
		{name: "gone after a few looks", lingers: 3},
		{name: "never gone", lingers: -1, timeout: 300 * time.Millisecond, want: "pod gpudra/" + "%s not gone after 300ms"},
		{name: "caller gives up", lingers: -1, cancel: true, want: context.Canceled.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.timeout == 0 {
				tc.timeout = 10 * time.Second
			}
			client := fake.NewClientset()
			l, err := New(Config{Client: client, Namespace: "gpudra", NodeName: "node-a", DriverName: "gpu.gpudra.io",
				Image: "ghcr.io/gpudra/gpudra:dev", StopTimeout: tc.timeout})
			if err != nil {
				t.Fatal(err)
			}
			d := daemon("GPU-1", false)
			if err := l.Start(ctx, d); err != nil {
				t.Fatal(err)
			}
			pod, err := client.CoreV1().Pods("gpudra").Get(ctx, l.PodName(d.ID), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			gets := 0
			client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				if tc.lingers >= 0 && gets > tc.lingers {
					return false, nil, nil // the tracker: deleted
				}
				if tc.cancel && gets == 2 {
					cancel()
				}
				return true, pod, nil
			})
			err = l.Stop(ctx, d)
			want := tc.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, l.PodName(d.ID))
			}
			switch {
			case want == "" && err != nil:
				t.Fatalf("Stop: %v", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Fatalf("Stop: %v, want an error with %q", err, want)
			}
			if tc.lingers > 0 && gets != tc.lingers+1 {
				t.Errorf("Stop looked %d times, want %d (until the pod was gone)", gets, tc.lingers+1)
			}
		})
	}
}

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

package simulate

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// processGone reports whether the process has exited (gone, or a zombie
// nobody reaped yet).
func processGone(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || len(s) < i+3 || s[i+2] == 'Z' || s[i+2] == 'X'
}

// waitReplaced waits until gpu-0's daemon is a new process and the old
// one has exited, and returns the new one.
func waitReplaced(t *testing.T, c *Cluster, old int, within time.Duration) int {
	t.Helper()
	start := time.Now()
	var pid int
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, within, true, func(context.Context) (bool, error) {
		pid = daemonPID(c, "gpu-0")
		return pid != 0 && pid != old && processGone(old), nil
	})
	if err != nil {
		t.Fatalf("within %v the daemon was not replaced: pid %d (was %d, gone: %v)", within, pid, old, processGone(old))
	}
	t.Logf("figure: the daemon was replaced %v after the wait began", time.Since(start).Round(time.Millisecond))
	return pid
}

// timed runs f, logs how long it took (the figures of the closing
// notes: go test -v -run 'Hung|Wedged|Wiped' ./internal/simulate | grep figure)
// and fails the test if it takes longer than limit.
func timed(t *testing.T, what string, limit time.Duration, f func() error) {
	t.Helper()
	start := time.Now()
	err := f()
	took := time.Since(start)
	t.Logf("figure: %s took %v", what, took.Round(time.Millisecond))
	if took > limit {
		t.Errorf("%s took %v, want at most %v", what, took.Round(time.Millisecond), limit)
	}
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// TestHungMPSDaemonIsReplaced: an MPS daemon that is stopped (SIGSTOP)
// still has its socket accept connections, but answers nothing. The
// plugin's check asks it a control command with a deadline: the device
// turns unhealthy, the hung daemon is killed and a new one answers within
// seconds. Meanwhile a co-tenant's unprepare and a new claim's prepare
// return within a few seconds, and the new claim joins the new daemon.
func TestHungMPSDaemonIsReplaced(t *testing.T) {
	ctx, c := startSharedCluster(t, "dgx-h100", "None")
	a, err := createAndRun(ctx, t, c, mpsShareOnGPU0("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := createAndRun(ctx, t, c, mpsShareOnGPU0("b"))
	if err != nil {
		t.Fatal(err)
	}
	reports := make(chan kubeletplugin.DeviceHealthReport, 64)
	go func() { _ = c.Driver.WatchHealthStatus(ctx, reports) }()
	<-reports

	old := daemonPID(c, "gpu-0")
	if err := syscall.Kill(old, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(old, syscall.SIGCONT) })
	stopped := time.Now()

	done := make(chan struct{})
	go func() {
		defer close(done)
		timed(t, "the co-tenant's unprepare", 5*time.Second, func() error { return c.StopPod(ctx, b) })
	}()
	var joined *PodResult
	timed(t, "a new claim's prepare", 10*time.Second, func() error {
		joined, err = createAndRun(ctx, t, c, mpsShareOnGPU0("c"))
		return err
	})
	<-done
	pid := waitReplaced(t, c, old, 10*time.Second)
	t.Logf("figure: the hung daemon was replaced %v after its SIGSTOP", time.Since(stopped).Round(time.Millisecond))
	if joined != nil && !exists(filepath.Join(mountOf(joined.Containers[0], "/tmp/nvidia-mps"), "control")) {
		t.Errorf("the new claim's pipe directory has no control socket")
	}
	sawUnhealthy := false
	for drained := false; !drained; {
		select {
		case r := <-reports:
			for _, d := range r.Devices {
				if d.DeviceName == "gpu-0" && d.Health == kubeletplugin.HealthStatusUnhealthy {
					sawUnhealthy = true
				}
			}
		default:
			drained = true
		}
	}
	if !sawUnhealthy {
		t.Log("the replacement came before any health report said unhealthy (the prepare replaced it)")
	}
	if got := daemons(t, c); len(got) != 1 || daemonPID(c, "gpu-0") != pid {
		t.Errorf("daemons %v, want the one replacement", got)
	}
	stopPod(ctx, t, c, a)
	if joined != nil {
		stopPod(ctx, t, c, joined)
	}
	assertSharingUndone(t, c, uuidOf(t, c, "gpu-0"), 0)
}

// TestWedgedMPSDaemonNotAdopted: while the plugin is down, its daemon
// wedges: stopped (SIGSTOP), or alive with its control socket gone. The
// restarted plugin does not adopt it: it is replaced during start-up, in
// seconds, and the next claim on the GPU is prepared at once.
func TestWedgedMPSDaemonNotAdopted(t *testing.T) {
	for name, wedge := range map[string]func(t *testing.T, c *Cluster, pid int){
		"stopped": func(t *testing.T, c *Cluster, pid int) {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
		},
		"socket gone": func(t *testing.T, c *Cluster, _ int) {
			if err := os.Remove(filepath.Join(c.Opts.MPSDir(), "gpu-0", "pipe", "control")); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, c := startSharedCluster(t, "dgx-h100", "None")
			a, err := createAndRun(ctx, t, c, mpsShareOnGPU0("a"))
			if err != nil {
				t.Fatal(err)
			}
			old := daemonPID(c, "gpu-0")
			c.Stop()
			wedge(t, c, old)
			timed(t, "the plugin's restart", 10*time.Second, func() error {
				c, err = Start(ctx, c.Opts, c.Client)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Stop)
			waitReplaced(t, c, old, 5*time.Second)
			var b *PodResult
			timed(t, "the next claim's prepare", 5*time.Second, func() error {
				b, err = createAndRun(ctx, t, c, mpsShareOnGPU0("b"))
				return err
			})
			for _, r := range []*PodResult{a, b} {
				if r != nil {
					stopPod(ctx, t, c, r)
				}
			}
			assertSharingUndone(t, c, uuidOf(t, c, "gpu-0"), 0)
		})
	}
}

// TestWipedDaemonDirectory: the daemon's directory is deleted under it (a
// cleanup script). The plugin notices that the daemon no longer answers,
// stops the old process (which a real nvidia-cuda-mps-control survives
// unharmed), recreates every directory, shm included, and starts a new
// one; the next claim gets mounts that exist.
func TestWipedDaemonDirectory(t *testing.T) {
	ctx, c := startSharedCluster(t, "dgx-h100", "None")
	a, err := createAndRun(ctx, t, c, mpsShareOnGPU0("a"))
	if err != nil {
		t.Fatal(err)
	}
	old := daemonPID(c, "gpu-0")
	dir := filepath.Join(c.Opts.MPSDir(), "gpu-0")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	waitReplaced(t, c, old, 10*time.Second)
	for _, sub := range []string{"pipe", "log", "shm"} {
		if !exists(filepath.Join(dir, sub)) {
			t.Errorf("%s/%s is missing after the daemon came back", dir, sub)
		}
	}
	b, err := createAndRun(ctx, t, c, mpsShareOnGPU0("b"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/tmp/nvidia-mps", "/var/log/nvidia-mps", "/dev/shm"} {
		if host := mountOf(b.Containers[0], p); !exists(host) {
			t.Errorf("the new claim's %s mount %s does not exist", p, host)
		}
	}
	for _, r := range []*PodResult{a, b} {
		stopPod(ctx, t, c, r)
	}
	assertSharingUndone(t, c, uuidOf(t, c, "gpu-0"), 0)
}

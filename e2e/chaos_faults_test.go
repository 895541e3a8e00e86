//go:build e2e && chaos

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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// Faults, each what a bad day on a GPU node does:
//
//   - sigkill: the plugin process dies at once (OOM kill, a crash); the
//     kubelet restarts the container;
//   - restart: the plugin pod is deleted (a drain, an upgrade) and the
//     DaemonSet makes a new one;
//   - xid-app, xid-critical: the GPU reports an XID error (one an
//     application causes, which must be ignored, or a hardware one, which
//     taints the GPU);
//   - disk-fill: the plugin's data disk is filled to the last byte (freed at
//     a later iteration: disk-free); checkpoint writes fail meanwhile;
//   - cdi-delete: a CDI spec of a prepared claim is deleted (a cleanup
//     job, an admin).
var faultKinds = []string{"sigkill", "restart", "xid-app", "xid-critical", "disk-fill", "cdi-delete"}

// fillerName is the file that fills the data disk.
const fillerName = ".chaos-filler"

// maxFillableBytes keeps disk-fill to a small disk made for it: chaos.sh
// mounts a tmpfs of a few MiB at the plugin data directory.
const maxFillableBytes = 64 << 20

func (c *chaos) injectFault(ctx context.Context) string {
	kind := faultKinds[c.rng.IntN(len(faultKinds))]
	if kind == "disk-fill" && c.diskFull {
		kind = "sigkill"
	}
	var err error
	switch kind {
	case "sigkill":
		err = c.killPlugin(ctx)
	case "restart":
		err = c.restartPlugin(ctx)
	case "xid-app":
		err = c.injectXID(ctx, []uint64{13, 31, 43}[c.rng.IntN(3)])
	case "xid-critical":
		err = c.injectXID(ctx, []uint64{48, 94}[c.rng.IntN(2)])
	case "disk-fill":
		err = c.fillDisk()
	case "cdi-delete":
		err = c.deleteSpec()
	}
	if err != nil {
		c.t.Logf("chaos: fault %s not injected: %v", kind, err)
		return kind + "(skipped)"
	}
	c.faults[kind]++
	return kind
}

// pluginPod waits (30 s at most) for the plugin pod whose container runs.
func (c *chaos) pluginPod(ctx context.Context) (*v1.Pod, error) {
	var found *v1.Pod
	err := poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := c.e.pluginPods(ctx)
		if err != nil {
			return false, err
		}
		for i := range pods {
			p := &pods[i]
			if p.DeletionTimestamp == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("no running plugin container: %w", err)
	}
	return found, nil
}

// pluginInstance is a plugin container: its pod and how often it had
// restarted.
type pluginInstance struct {
	uid      string
	restarts int32
}

// waitPluginReady waits until a plugin other than the one killed is
// Ready (serving, and registered with the kubelet): the restarted
// container of the same pod, or a new pod.
func (c *chaos) waitPluginReady(ctx context.Context, timeout time.Duration) error {
	err := poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		pods, err := c.e.pluginPods(ctx)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) != 1 {
				continue
			}
			if string(p.UID) == c.killed.uid && p.Status.ContainerStatuses[0].RestartCount <= c.killed.restarts {
				continue
			}
			if podReady(&p) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("no plugin Ready again after it was killed: %w", err)
	}
	return nil
}

func (c *chaos) killPlugin(ctx context.Context) error {
	pod, err := c.pluginPod(ctx)
	if err != nil {
		return err
	}
	c.killed = pluginInstance{uid: string(pod.UID), restarts: pod.Status.ContainerStatuses[0].RestartCount}
	pid := pluginPID(string(pod.UID))
	if pid == 0 {
		return errors.New("no plugin process (restarting?)")
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

func (c *chaos) restartPlugin(ctx context.Context) error {
	pod, err := c.pluginPod(ctx)
	if err != nil {
		return err
	}
	c.killed = pluginInstance{uid: string(pod.UID), restarts: pod.Status.ContainerStatuses[0].RestartCount}
	return c.e.cs.CoreV1().Pods(systemNS).Delete(ctx, pod.Name, metav1.DeleteOptions{})
}

// injectXID reports the XID on a random GPU of the node, through the fake
// GPUs' event log on the node, as the kernel driver reports it to NVML.
func (c *chaos) injectXID(ctx context.Context, xid uint64) error {
	list, err := c.e.slices(ctx)
	if err != nil {
		return err
	}
	var uuids []string
	for _, s := range list {
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes["type"]; ok && a.StringValue != nil && *a.StringValue == "gpu" {
				if u, ok := d.Attributes["uuid"]; ok && u.StringValue != nil {
					uuids = append(uuids, *u.StringValue)
				}
			}
		}
	}
	if len(uuids) == 0 {
		return errors.New("no GPU in the slices")
	}
	sort.Strings(uuids)
	return nvmlfake.InjectXID(c.e.fakeDir, uuids[c.rng.IntN(len(uuids))], xid)
}

// dataDir is the plugin data directory on the node.
func (c *chaos) dataDir() string { return filepath.Join(c.e.kubeletDir, "plugins", c.e.driver) }

// fillDisk fills the plugin's data disk to the last byte, if it is a small
// one made for it.
func (c *chaos) fillDisk() error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(c.dataDir(), &st); err != nil {
		return err
	}
	if size := uint64(st.Blocks) * uint64(st.Bsize); size > maxFillableBytes {
		return errors.New("the plugin data directory is not on a small disk of its own (chaos.sh mounts one); not filling a real disk")
	}
	f, err := os.OpenFile(filepath.Join(c.dataDir(), fillerName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			return err
		}
	}
	// Down to the last byte: smaller writes fill what a 64 KiB one could not.
	for {
		if _, err := f.Write(buf[:512]); err != nil {
			break
		}
	}
	c.diskFull = true
	return nil
}

func (c *chaos) freeDisk(ctx context.Context) {
	if err := os.Remove(filepath.Join(c.dataDir(), fillerName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.violate("free disk", err.Error())
	}
	c.diskFull = false
	c.faults["disk-free"]++
}

// deleteSpec deletes a random CDI spec of this driver.
func (c *chaos) deleteSpec() error {
	specs, err := c.specFiles()
	if err != nil {
		return err
	}
	if len(specs) == 0 {
		return errors.New("no CDI spec to delete")
	}
	return os.Remove(filepath.Join(c.e.cdiDir, specs[c.rng.IntN(len(specs))]))
}

// specFiles lists this driver's claim spec files on the node.
func (c *chaos) specFiles() ([]string, error) {
	entries, err := os.ReadDir(c.e.cdiDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "k8s."+c.e.driver+"-claim_") && !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

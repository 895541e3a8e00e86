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
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/nodestate"
)

// TestRepeatedPrepare: the kubelet may call prepare again (e.g. after its
// own restart); the plugin returns the same devices and creates nothing new.
func TestRepeatedPrepare(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	res, err := createAndRun(ctx, t, c, gpuClaim("again", 2, ""))
	if err != nil {
		t.Fatal(err)
	}
	claim := res.Claims[0].Claim
	specs := cdiSpecs(t, c)
	for i := 0; i < 3; i++ {
		resp, err := c.NodePrepareResources(ctx, claim)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.Claims[string(claim.UID)]
		if r.Error != "" {
			t.Fatalf("repeated prepare failed: %s", r.Error)
		}
		if !sameDevices(r.Devices, res.Claims[0].Devices) {
			t.Errorf("repeated prepare returned %v, first returned %v", r.Devices, res.Claims[0].Devices)
		}
	}
	if got := cdiSpecs(t, c); !reflect.DeepEqual(got, specs) {
		t.Errorf("CDI specs changed on repeated prepare: %v -> %v", specs, got)
	}
	if n := len(c.Driver.State().PreparedClaims()); n != 1 {
		t.Errorf("%d claims in the checkpoint, want 1", n)
	}
}

// TestUnprepare: unprepare removes the claim's CDI spec and frees nothing
// else; unpreparing it again or unpreparing a claim the node never saw
// succeeds.
func TestUnprepare(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	res, err := createAndRun(ctx, t, c, gpuClaim("gone", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := c.StopPod(ctx, res); err != nil {
			t.Fatalf("unprepare #%d: %v", i+1, err)
		}
	}
	assertNothingPrepared(t, c)

	unknown := gpuClaim("never-seen", 1, "")
	unknown.UID = "5a1e0000-0000-0000-0000-000000000000"
	resp, err := c.NodeUnprepareResources(ctx, unknown)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Claims[string(unknown.UID)]; r == nil || r.Error != "" {
		t.Fatalf("unprepare of an unknown claim = %+v, want success", r)
	}
}

// TestCrashBetweenPrepareStartedAndCompleted: a plugin killed after
// recording PrepareStarted leaves the claim half-prepared. The restarted
// plugin rolls it back, and the kubelet's retry prepares it in full.
func TestCrashBetweenPrepareStartedAndCompleted(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := gpudratest.ShortTempDir(t)
	crash := errors.New("simulated crash")
	c, err := Start(ctx, Options{Dir: dir, Hooks: nodestate.Hooks{AfterPrepareStarted: func(string) error { return crash }}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	applyClasses(ctx, t, c)
	claim, err := c.CreateClaim(ctx, gpuClaim("half", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	claim, err = c.Allocate(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.NodePrepareResources(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Claims[string(claim.UID)]; r == nil || !strings.Contains(r.Error, "simulated crash") {
		t.Fatalf("prepare = %+v, want the simulated crash", r)
	}
	if got := c.Driver.State().PreparedClaims()[string(claim.UID)]; got != checkpoint.PrepareStarted {
		t.Fatalf("checkpoint state %q, want PrepareStarted after the crash", got)
	}

	// Restart without the crash hook.
	c.Stop()
	c.Opts.Hooks = nodestate.Hooks{}
	c, err = Start(ctx, c.Opts, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if n := len(c.Driver.State().PreparedClaims()); n != 0 {
		t.Fatalf("after restart %d claims recorded, want the half-prepared one rolled back", n)
	}
	resp, err = c.NodePrepareResources(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Claims[string(claim.UID)]
	if r.Error != "" || len(r.Devices) != 1 {
		t.Fatalf("retry after restart = %+v, want one prepared device", r)
	}
	if got := c.Driver.State().PreparedClaims()[string(claim.UID)]; got != checkpoint.PrepareCompleted {
		t.Errorf("checkpoint state %q, want PrepareCompleted", got)
	}
	view, err := c.Inject("ctr", r.Devices[0].CdiDeviceIds)
	if err != nil {
		t.Fatal(err)
	}
	if got := view.FakeDevices(); len(got) != 1 {
		t.Errorf("container of the retried claim sees GPUs %v, want one", got)
	}
}

// TestRebootRewritesCDISpecs: /var/run/cdi is a tmpfs; after a reboot the
// checkpoint survives but the specs are gone. The plugin rewrites them at
// start-up, and removes specs of claims it no longer holds.
func TestRebootRewritesCDISpecs(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	res, err := createAndRun(ctx, t, c, gpuClaim("survivor", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	before := cdiSpecs(t, c)
	if len(before) != 1 {
		t.Fatalf("CDI specs %v, want one", before)
	}
	c.Stop()
	// Reboot: the tmpfs is emptied, a stale spec of a claim that is gone
	// appears (e.g. restored from a backup), the boot ID changes.
	if err := os.RemoveAll(c.Opts.CDIDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c.Opts.CDIDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(c.Opts.CDIDir(), "k8s.gpu.gpudra.io-claim_00000000-dead-beef-0000-000000000000.yaml")
	if err := os.WriteFile(stale, []byte("cdiVersion: 0.5.0\nkind: k8s.gpu.gpudra.io/claim\ndevices:\n- name: 00000000-dead-beef-0000-000000000000-gpu-0\n  containerEdits:\n    env: [A=b]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := c.Opts
	opts.BootID = "boot-2"
	c2, err := Start(ctx, opts, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	if got := cdiSpecs(t, c2); !reflect.DeepEqual(got, before) {
		t.Errorf("CDI specs after reboot %v, want %v (rewritten, stale one removed)", got, before)
	}
	view, err := c2.Inject("ctr", res.Claims[0].Devices[0].CdiDeviceIds)
	if err != nil {
		t.Fatalf("container restart after reboot cannot resolve its CDI devices: %v", err)
	}
	if got, want := view.FakeDevices(), res.Containers[0].FakeDevices(); len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("after reboot the container sees %v, want %v", got, want)
	}
}

// TestInvalidConfig: a bad opaque config fails the prepare with an error
// that names the claim, the request and the field, and leaves nothing
// behind.
func TestInvalidConfig(t *testing.T) {
	tests := []struct {
		name   string
		params string
		want   []string
	}{
		{"unknown field", `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilites":["compute"]}`, []string{`default/bad`, `request "gpu"`, `spec.devices.config[0]`, "driverCapabilites"}},
		{"unknown kind", `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GPUConfig"}`, []string{`default/bad`, `request "gpu"`, "GPUConfig"}},
		{"bad value", `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":["cuda"]}`, []string{`default/bad`, `request "gpu"`, "driverCapabilities[0]", `"cuda"`}},
		{"MIG config on a whole GPU", `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"MigConfig"}`, []string{`default/bad`, `request "gpu"`, "GpuConfig"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c := startCluster(t, "dgx-h100")
			_, err := createAndRun(ctx, t, c, withConfig(gpuClaim("bad", 1, ""), tc.params))
			if err == nil {
				t.Fatal("prepare succeeded, want a config error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			assertNothingPrepared(t, c)
		})
	}
}

// TestValidConfig: a GpuConfig reaches the container.
func TestValidConfig(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	res, err := createAndRun(ctx, t, c, withConfig(gpuClaim("cfg", 1, ""),
		`{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":["compute","graphics"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Containers[0].EnvValue("NVIDIA_DRIVER_CAPABILITIES"); v != "compute,graphics" {
		t.Errorf("NVIDIA_DRIVER_CAPABILITIES = %q, want compute,graphics", v)
	}
}

// TestClaimDeletedWhilePluginDown: the kubelet unprepares a claim whose pod
// went away while the plugin was down, once the plugin is back.
func TestClaimDeletedWhilePluginDown(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	res, err := createAndRun(ctx, t, c, gpuClaim("orphan", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	claim := res.Claims[0].Claim
	c.Stop()
	if err := c.Client.ResourceV1().ResourceClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c2, err := Start(ctx, c.Opts, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	if err := c2.StopPod(ctx, res); err != nil {
		t.Fatal(err)
	}
	assertNothingPrepared(t, c2)
}

func cdiSpecs(t *testing.T, c *Cluster) []string {
	t.Helper()
	entries, err := os.ReadDir(c.Opts.CDIDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func sameDevices(a, b []*drapb.Device) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].PoolName != b[i].PoolName || a[i].DeviceName != b[i].DeviceName ||
			!reflect.DeepEqual(a[i].RequestNames, b[i].RequestNames) || !reflect.DeepEqual(a[i].CdiDeviceIds, b[i].CdiDeviceIds) {
			return false
		}
	}
	return true
}

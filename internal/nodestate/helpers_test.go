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

package nodestate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpudra/gpudra/internal/cdispec"
	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
)

const (
	testDriver = "gpu.gpudra.io"
	testNode   = "node-a"
	testClass  = "gpu.gpudra.io"
	testBootID = "boot-1"
)

// fakeHardware gives every GPU an env entry naming its UUID and a device
// node that is /dev/null on the host, so a spec written for it passes the
// CDI library's validation and shows which GPUs a container would get.
type fakeHardware struct {
	// noMIG: the test inventories have no MIG-capable GPU, so the node
	// state never calls a MIG operation on them.
	noMIG
	noSharing
}

// CommonEdits says which driver capabilities it was asked for in
// GPUDRA_CAPABILITIES, so tests can check the union a claim gets.
func (fakeHardware) CommonEdits(caps []string) gpu.Edits {
	return gpu.Edits{
		Env:         []string{"GPUDRA_COMMON=1", "GPUDRA_CAPABILITIES=" + strings.Join(caps, ",")},
		DeviceNodes: []gpu.DeviceNode{{Path: "/dev/nvidiactl", HostPath: "/dev/null"}},
	}
}

func (fakeHardware) DeviceEdits(g gpu.GPU) gpu.Edits {
	return gpu.Edits{
		Env:         []string{fmt.Sprintf("GPU_%d=%s", g.Minor, g.UUID)},
		DeviceNodes: []gpu.DeviceNode{{Path: fmt.Sprintf("/dev/nvidia%d", g.Minor), HostPath: "/dev/null"}},
	}
}

var errNoMIG = errors.New("no MIG on this test hardware")

// noMIG is a Hardware's MIG half that has no MIG-capable GPU.
type noMIG struct{}

func (noMIG) MigDeviceEdits(gpu.GPU, int, int, string) (gpu.Edits, error) {
	return gpu.Edits{}, errNoMIG
}
func (noMIG) MigMode(string) (bool, bool, error) { return false, false, nil }
func (noMIG) SetMigMode(string, bool) error      { return errNoMIG }
func (noMIG) CreateGPUInstance(string, uint32, gpu.MigPlacement) (int, error) {
	return 0, errNoMIG
}
func (noMIG) CreateComputeInstance(string, int) (int, error)                 { return 0, errNoMIG }
func (noMIG) MigDeviceUUID(string, int, int) (string, error)                 { return "", errNoMIG }
func (noMIG) DestroyComputeInstance(string, int, int) error                  { return errNoMIG }
func (noMIG) DestroyGPUInstance(string, int, uint32, gpu.MigPlacement) error { return errNoMIG }
func (noMIG) MigInstances(string) ([]gpu.MigInstance, error)                 { return nil, nil }

func gpuUUID(minor int) string { return fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", minor) }

func testInventory(gpus int) gpu.Node {
	n := gpu.Node{Name: testNode}
	for i := range gpus {
		n.GPUs = append(n.GPUs, gpu.GPU{Index: i, Minor: i, UUID: gpuUUID(i)})
	}
	return n
}

// node is one simulated node: its CDI directory and checkpoint file outlive
// the State, so a test can "restart the plugin" with start.
type node struct {
	t      *testing.T
	ctx    context.Context
	cdiDir string
	cpPath string
	gpus   int
	bootID string
	hooks  Hooks
	cdi    *cdispec.Writer
	// domain is the node's NVLink domain (none by default); imex its
	// daemon's readiness (nil: always ready).
	domain string
	imex   IMEXReadiness
}

func newNode(t *testing.T, gpus int) *node {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	n := &node{
		t:      t,
		ctx:    ctx,
		cdiDir: filepath.Join(dir, "cdi"),
		cpPath: filepath.Join(dir, "plugin", "checkpoint.json"),
		gpus:   gpus,
		bootID: testBootID,
	}
	w, err := cdispec.New(n.cdiDir, testDriver)
	if err != nil {
		t.Fatal(err)
	}
	n.cdi = w
	return n
}

// newState is a plugin start without Reconcile.
func (n *node) newState() (*State, error) {
	return New(Options{
		DriverName: testDriver,
		Node:       testInventory(n.gpus),
		Hardware:   fakeHardware{},
		CDI:        n.cdi,
		Checkpoint: checkpoint.NewStore(n.cpPath),
		BootID:     n.bootID,
		Hooks:      n.hooks,

		NVLinkDomain: func() string { return n.domain },
		Channels:     fakeChannels{},
		IMEX:         n.imex,
	})
}

func (n *node) start() *State {
	n.t.Helper()
	s, err := n.newState()
	if err != nil {
		n.t.Fatalf("New: %v", err)
	}
	return s
}

// restart is a plugin start as the driver does it: New, then Reconcile.
func (n *node) restart() (*State, ReconcileReport) {
	n.t.Helper()
	s := n.start()
	report, err := s.Reconcile(n.ctx)
	if err != nil {
		n.t.Fatalf("Reconcile: %v", err)
	}
	return s, report
}

// onDisk is what a freshly started plugin would read from the checkpoint.
func (n *node) onDisk() map[string]checkpoint.Claim {
	n.t.Helper()
	cp, err := checkpoint.NewStore(n.cpPath).Load()
	if err != nil {
		n.t.Fatalf("load checkpoint: %v", err)
	}
	return cp.Claims
}

// specFiles lists the files in the CDI directory, temporary ones included:
// a leftover of any kind is a leak.
func (n *node) specFiles() []string {
	n.t.Helper()
	entries, err := os.ReadDir(n.cdiDir)
	if err != nil {
		n.t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func (n *node) specPath(uid string) string {
	return filepath.Join(n.cdiDir, cdi.GenerateTransientSpecName("k8s."+testDriver, cdispec.Class, uid)+".yaml")
}

func (n *node) readSpec(uid string) []byte {
	n.t.Helper()
	data, err := os.ReadFile(n.specPath(uid))
	if err != nil {
		n.t.Fatalf("read CDI spec of %s: %v", uid, err)
	}
	return data
}

// inject resolves CDI device IDs as a container runtime does, from a fresh
// view of the spec directory, and returns the container's environment.
func (n *node) inject(ids ...string) []string {
	n.t.Helper()
	cache, err := cdi.NewCache(cdi.WithSpecDirs(n.cdiDir), cdi.WithAutoRefresh(false))
	if err != nil {
		n.t.Fatal(err)
	}
	if err := cache.Refresh(); err != nil {
		n.t.Fatalf("the CDI library rejects the spec directory: %v", err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if unresolved, err := cache.InjectDevices(spec, ids...); err != nil {
		n.t.Fatalf("inject %v: unresolved %v: %v", ids, unresolved, err)
	}
	return spec.Process.Env
}

// envValue returns the value of key in env, the last one winning as in a
// process environment.
func envValue(env []string, key string) (string, bool) {
	var val string
	var found bool
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, key+"="); ok {
			val, found = v, true
		}
	}
	return val, found
}

// result is an allocation result of this driver on this node.
func result(request string, minor int) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{
		Request: request,
		Driver:  testDriver,
		Pool:    testNode,
		Device:  gpu.WholeDeviceName(minor),
	}
}

func adminResult(request string, minor int) resourceapi.DeviceRequestAllocationResult {
	r := result(request, minor)
	admin := true
	r.AdminAccess = &admin
	return r
}

// opaqueConfig is one opaque config entry, of a claim or of a DeviceClass.
type opaqueConfig struct {
	driver   string // testDriver when empty
	requests []string
	params   string
}

func (c opaqueConfig) device() resourceapi.DeviceConfiguration {
	driver := c.driver
	if driver == "" {
		driver = testDriver
	}
	return resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
		Driver:     driver,
		Parameters: runtime.RawExtension{Raw: []byte(c.params)},
	}}
}

// claimSpec describes an allocated claim the way a test needs it.
type claimSpec struct {
	name         string
	results      []resourceapi.DeviceRequestAllocationResult
	classConfigs []opaqueConfig // from the DeviceClass, copied by the allocator
	claimConfigs []opaqueConfig // the claim's spec.devices.config
	// claimConfigsFirst lists the claim's configs before the class's in
	// the allocation, which the API does not forbid.
	claimConfigsFirst bool
}

// makeClaim builds an allocated ResourceClaim as the scheduler leaves it:
// one request per request name in the results, class configs copied into
// the allocation before the claim's own.
func makeClaim(c claimSpec) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: c.name, UID: types.UID(uidOf(c.name))},
	}
	var requests []string
	for _, r := range c.results {
		if !slices.Contains(requests, r.Request) {
			requests = append(requests, r.Request)
		}
	}
	for _, name := range requests {
		claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, resourceapi.DeviceRequest{
			Name:    name,
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: testClass},
		})
	}
	var fromClass, fromClaim []resourceapi.DeviceAllocationConfiguration
	for _, cc := range c.classConfigs {
		fromClass = append(fromClass, resourceapi.DeviceAllocationConfiguration{
			Source: resourceapi.AllocationConfigSourceClass, Requests: cc.requests, DeviceConfiguration: cc.device(),
		})
	}
	for _, cc := range c.claimConfigs {
		claim.Spec.Devices.Config = append(claim.Spec.Devices.Config, resourceapi.DeviceClaimConfiguration{
			Requests: cc.requests, DeviceConfiguration: cc.device(),
		})
		fromClaim = append(fromClaim, resourceapi.DeviceAllocationConfiguration{
			Source: resourceapi.AllocationConfigSourceClaim, Requests: cc.requests, DeviceConfiguration: cc.device(),
		})
	}
	configs := append(fromClass, fromClaim...)
	if c.claimConfigsFirst {
		configs = append(fromClaim, fromClass...)
	}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: c.results,
		Config:  configs,
	}}
	return claim
}

func uidOf(name string) string { return "uid-" + name }

func refOf(claim *resourceapi.ResourceClaim) ClaimRef {
	return ClaimRef{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}
}

func gpuConfig(caps ...string) string {
	q := make([]string, len(caps))
	for i, c := range caps {
		q[i] = `"` + c + `"`
	}
	return `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":[` + strings.Join(q, ",") + `]}`
}

// mustPrepare prepares the claim and fails the test on error.
func mustPrepare(t *testing.T, ctx context.Context, s *State, claim *resourceapi.ResourceClaim) []PreparedDevice {
	t.Helper()
	devs, err := s.Prepare(ctx, claim)
	if err != nil {
		t.Fatalf("Prepare %s: %v", claim.Name, err)
	}
	return devs
}

// deviceID is the CDI ID the kubelet must receive for a claim's device.
func deviceID(claimName string, minor int) string {
	return "k8s." + testDriver + "/claim=" + uidOf(claimName) + "-" + gpu.WholeDeviceName(minor)
}

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
	"bytes"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/checkpoint"
)

func TestPrepare(t *testing.T) {
	otherDriver := result("gpu", 1)
	otherDriver.Driver = "nic.example.com"
	otherDriver.Pool = "some-other-pool"

	tests := []struct {
		name        string
		claim       claimSpec
		wantDevices []PreparedDevice
		// wantEnv is, per CDI device ID injected alone, environment the
		// container must see.
		wantEnv map[string][]string
		// wantNoEnv is, per CDI device ID, environment it must not see.
		wantNoEnv map[string][]string
	}{
		{
			name:  "two GPUs in one request",
			claim: claimSpec{name: "two", results: []resourceapi.DeviceRequestAllocationResult{result("gpus", 0), result("gpus", 1)}},
			wantDevices: []PreparedDevice{
				{Requests: []string{"gpus"}, Pool: testNode, Device: "gpu-0", CDIDeviceIDs: []string{deviceID("two", 0)}},
				{Requests: []string{"gpus"}, Pool: testNode, Device: "gpu-1", CDIDeviceIDs: []string{deviceID("two", 1)}},
			},
			// Each device brings its own edits; the claim's common edits
			// come with the default driver capabilities.
			wantEnv: map[string][]string{
				deviceID("two", 0): {"NVIDIA_DRIVER_CAPABILITIES=compute,utility", "GPU_0=" + gpuUUID(0), "GPUDRA_COMMON=1", "GPUDRA_CAPABILITIES=compute,utility"},
				deviceID("two", 1): {"NVIDIA_DRIVER_CAPABILITIES=compute,utility", "GPU_1=" + gpuUUID(1), "GPUDRA_COMMON=1"},
			},
		},
		{
			name:  "two requests see only their own GPU",
			claim: claimSpec{name: "split", results: []resourceapi.DeviceRequestAllocationResult{result("a", 0), result("b", 1)}},
			wantDevices: []PreparedDevice{
				{Requests: []string{"a"}, Pool: testNode, Device: "gpu-0", CDIDeviceIDs: []string{deviceID("split", 0)}},
				{Requests: []string{"b"}, Pool: testNode, Device: "gpu-1", CDIDeviceIDs: []string{deviceID("split", 1)}},
			},
			wantEnv: map[string][]string{
				deviceID("split", 0): {"GPU_0=" + gpuUUID(0)},
				deviceID("split", 1): {"GPU_1=" + gpuUUID(1)},
			},
			wantNoEnv: map[string][]string{
				deviceID("split", 0): {"GPU_1=" + gpuUUID(1)},
			},
		},
		{
			name: "results of another driver are ignored",
			claim: claimSpec{name: "mixed", results: []resourceapi.DeviceRequestAllocationResult{
				result("gpu", 0), otherDriver,
			}},
			wantDevices: []PreparedDevice{
				{Requests: []string{"gpu"}, Pool: testNode, Device: "gpu-0", CDIDeviceIDs: []string{deviceID("mixed", 0)}},
			},
			wantEnv: map[string][]string{
				deviceID("mixed", 0): {"GPU_0=" + gpuUUID(0)},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 4)
			s := n.start()
			claim := makeClaim(tc.claim)
			got := mustPrepare(t, n.ctx, s, claim)
			if !reflect.DeepEqual(got, tc.wantDevices) {
				t.Errorf("Prepare = %+v\nwant %+v", got, tc.wantDevices)
			}
			if files := n.specFiles(); len(files) != 1 {
				t.Errorf("CDI spec files %v, want one for the claim", files)
			}
			for id, want := range tc.wantEnv {
				env := n.inject(id)
				for _, e := range want {
					if !slices.Contains(env, e) {
						t.Errorf("container with %s: env %q missing from %v", id, e, env)
					}
				}
				// Visibility is by device nodes: no per-device
				// NVIDIA_VISIBLE_DEVICES that the last device applied
				// would set for the whole container.
				if v, ok := envValue(env, "NVIDIA_VISIBLE_DEVICES"); ok {
					t.Errorf("container with %s: NVIDIA_VISIBLE_DEVICES=%s", id, v)
				}
			}
			for id, unwanted := range tc.wantNoEnv {
				env := n.inject(id)
				for _, e := range unwanted {
					if slices.Contains(env, e) {
						t.Errorf("container with %s sees %q of another request", id, e)
					}
				}
			}
			if c, ok := n.onDisk()[uidOf(tc.claim.name)]; !ok || c.State != checkpoint.PrepareCompleted {
				t.Errorf("checkpoint on disk holds %+v, want the claim PrepareCompleted", c)
			}
		})
	}
}

// TestPrepareNothingOfThisDriver: a claim whose devices all belong to other
// drivers needs nothing from this node, and must not fail.
func TestPrepareNothingOfThisDriver(t *testing.T) {
	n := newNode(t, 1)
	s := n.start()
	other := result("nic", 0)
	other.Driver = "nic.example.com"
	devs, err := s.Prepare(n.ctx, makeClaim(claimSpec{name: "nic", results: []resourceapi.DeviceRequestAllocationResult{other}}))
	if err != nil || len(devs) != 0 {
		t.Fatalf("Prepare = %+v, %v; want no devices and no error", devs, err)
	}
	if got := s.PreparedClaims(); len(got) != 0 {
		t.Errorf("claims recorded: %v", got)
	}
	if files := n.specFiles(); len(files) != 0 {
		t.Errorf("CDI spec files %v for a claim without devices of this driver", files)
	}
}

// TestPrepareRejects: a claim this node cannot serve fails with an error
// that leads the user to the cause, and leaves no trace.
func TestPrepareRejects(t *testing.T) {
	otherPool := result("gpu", 0)
	otherPool.Pool = "node-b"
	badCaps := gpuConfig("compute", "cuda")
	migConfig := `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"MigConfig"}`

	tests := []struct {
		name     string
		claim    *resourceapi.ResourceClaim
		wantErrs []string
	}{
		{
			name:     "device in another pool",
			claim:    makeClaim(claimSpec{name: "elsewhere", results: []resourceapi.DeviceRequestAllocationResult{otherPool}}),
			wantErrs: []string{"default/elsewhere", `request "gpu"`, "gpu-0", `pool "node-b"`},
		},
		{
			name:     "device the node does not have",
			claim:    makeClaim(claimSpec{name: "ghost", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0), result("gpu", 7)}}),
			wantErrs: []string{"default/ghost", `request "gpu"`, `"gpu-7"`, "not a GPU on node " + testNode},
		},
		{
			name: "not allocated",
			claim: func() *resourceapi.ResourceClaim {
				c := makeClaim(claimSpec{name: "pending"})
				c.Status.Allocation = nil
				return c
			}(),
			wantErrs: []string{"default/pending", "not allocated"},
		},
		{
			name: "invalid claim config",
			claim: makeClaim(claimSpec{
				name:    "badcfg",
				results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)},
				claimConfigs: []opaqueConfig{
					{requests: []string{"other"}, params: gpuConfig("video")},
					{requests: []string{"gpu"}, params: badCaps},
				},
			}),
			wantErrs: []string{"default/badcfg", `request "gpu"`, "spec.devices.config[1]", "driverCapabilities[1]", `"cuda"`},
		},
		{
			// The scheduler clears the requests of a config that covers
			// every request of the claim ("empty means all").
			name: "invalid claim config the scheduler widened to all requests",
			claim: func() *resourceapi.ResourceClaim {
				c := makeClaim(claimSpec{
					name:         "widened",
					results:      []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)},
					claimConfigs: []opaqueConfig{{requests: []string{"gpu"}, params: gpuConfig("graphics")}, {requests: []string{"gpu"}, params: badCaps}},
				})
				for i := range c.Status.Allocation.Devices.Config {
					c.Status.Allocation.Devices.Config[i].Requests = nil
				}
				return c
			}(),
			wantErrs: []string{"default/widened", `request "gpu"`, "spec.devices.config[1]", "driverCapabilities[1]"},
		},
		{
			name: "unknown field in claim config",
			claim: makeClaim(claimSpec{
				name:         "typo",
				results:      []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)},
				claimConfigs: []opaqueConfig{{params: `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilites":["compute"]}`}},
			}),
			wantErrs: []string{"default/typo", `request "gpu"`, "spec.devices.config[0]", `unknown field "driverCapabilites"`},
		},
		{
			name: "invalid DeviceClass config",
			claim: makeClaim(claimSpec{
				name:         "badclass",
				results:      []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)},
				classConfigs: []opaqueConfig{{params: badCaps}},
			}),
			wantErrs: []string{"default/badclass", `request "gpu"`, `DeviceClass "` + testClass + `"`, "driverCapabilities[1]"},
		},
		{
			name: "MigConfig on a whole GPU",
			claim: makeClaim(claimSpec{
				name:         "mig",
				results:      []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)},
				claimConfigs: []opaqueConfig{{requests: []string{"gpu"}, params: migConfig}},
			}),
			wantErrs: []string{"default/mig", `request "gpu"`, "gpu-0", "MigConfig", "spec.devices.config[0]", "GpuConfig"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 2)
			s := n.start()
			devs, err := s.Prepare(n.ctx, tc.claim)
			if err == nil {
				t.Fatalf("Prepare = %+v, want an error", devs)
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if got := s.PreparedClaims(); len(got) != 0 {
				t.Errorf("claims recorded after a rejected prepare: %v", got)
			}
			if got := n.onDisk(); len(got) != 0 {
				t.Errorf("checkpoint on disk holds %v after a rejected prepare", got)
			}
			if files := n.specFiles(); len(files) != 0 {
				t.Errorf("CDI spec files %v after a rejected prepare", files)
			}
		})
	}
}

func TestConfigPrecedence(t *testing.T) {
	two := []resourceapi.DeviceRequestAllocationResult{result("gpu", 0), result("aux", 1)}
	tests := []struct {
		name  string
		claim claimSpec
		// wantCaps is NVIDIA_DRIVER_CAPABILITIES per device.
		wantCaps map[int]string
	}{
		{
			name:     "no config: the default",
			claim:    claimSpec{results: two},
			wantCaps: map[int]string{0: "compute,utility", 1: "compute,utility"},
		},
		{
			name:     "DeviceClass config applies",
			claim:    claimSpec{results: two, classConfigs: []opaqueConfig{{requests: []string{"gpu"}, params: gpuConfig("graphics")}}},
			wantCaps: map[int]string{0: "graphics", 1: "compute,utility"},
		},
		{
			name: "claim config overrides DeviceClass config of the same request",
			claim: claimSpec{results: two,
				classConfigs: []opaqueConfig{{requests: []string{"gpu"}, params: gpuConfig("graphics")}},
				claimConfigs: []opaqueConfig{{requests: []string{"gpu"}, params: gpuConfig("video")}},
			},
			wantCaps: map[int]string{0: "video", 1: "compute,utility"},
		},
		{
			name: "claim config wins even when listed before the class config",
			claim: claimSpec{results: two, claimConfigsFirst: true,
				classConfigs: []opaqueConfig{{requests: []string{"gpu"}, params: gpuConfig("graphics")}},
				claimConfigs: []opaqueConfig{{requests: []string{"gpu"}, params: gpuConfig("video")}},
			},
			wantCaps: map[int]string{0: "video", 1: "compute,utility"},
		},
		{
			name:     "claim config for all requests",
			claim:    claimSpec{results: two, claimConfigs: []opaqueConfig{{params: gpuConfig("all")}}},
			wantCaps: map[int]string{0: "all", 1: "all"},
		},
		{
			name: "later claim config wins",
			claim: claimSpec{results: two, claimConfigs: []opaqueConfig{
				{params: gpuConfig("graphics")},
				{requests: []string{"aux"}, params: gpuConfig("video")},
			}},
			wantCaps: map[int]string{0: "graphics", 1: "video"},
		},
		{
			name:     "config of another request does not apply",
			claim:    claimSpec{results: two, claimConfigs: []opaqueConfig{{requests: []string{"other"}, params: gpuConfig("video")}}},
			wantCaps: map[int]string{0: "compute,utility", 1: "compute,utility"},
		},
		{
			// Another driver's parameters are not ours to decode: this
			// one would not even parse as ours.
			name:     "config of another driver does not apply",
			claim:    claimSpec{results: two, claimConfigs: []opaqueConfig{{driver: "nic.example.com", params: `{"mtu":9000}`}}},
			wantCaps: map[int]string{0: "compute,utility", 1: "compute,utility"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 2)
			s := n.start()
			tc.claim.name = "cfg"
			mustPrepare(t, n.ctx, s, makeClaim(tc.claim))
			for minor, want := range tc.wantCaps {
				env := n.inject(deviceID("cfg", minor))
				if got, _ := envValue(env, "NVIDIA_DRIVER_CAPABILITIES"); got != want {
					t.Errorf("gpu-%d: NVIDIA_DRIVER_CAPABILITIES=%q, want %q", minor, got, want)
				}
			}
		})
	}
}

func TestDeviceAlreadyPrepared(t *testing.T) {
	tests := []struct {
		name     string
		first    resourceapi.DeviceRequestAllocationResult
		second   resourceapi.DeviceRequestAllocationResult
		wantErrs []string // empty: the second claim prepares
	}{
		{
			name:     "same GPU for two claims",
			first:    result("gpu", 0),
			second:   result("gpu", 0),
			wantErrs: []string{"default/second", `request "gpu"`, "gpu-0", "already prepared for ResourceClaim default/first"},
		},
		{name: "different GPUs", first: result("gpu", 0), second: result("gpu", 1)},
		{name: "admin access next to a workload", first: result("gpu", 0), second: adminResult("gpu", 0)},
		{name: "workload next to admin access", first: adminResult("gpu", 0), second: result("gpu", 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 2)
			s := n.start()
			mustPrepare(t, n.ctx, s, makeClaim(claimSpec{name: "first", results: []resourceapi.DeviceRequestAllocationResult{tc.first}}))
			second := makeClaim(claimSpec{name: "second", results: []resourceapi.DeviceRequestAllocationResult{tc.second}})
			_, err := s.Prepare(n.ctx, second)
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("Prepare second: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Prepare second succeeded, want it refused")
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if _, ok := s.PreparedClaims()[uidOf("second")]; ok {
				t.Error("refused claim is recorded")
			}
			// Once the first claim lets go, the GPU is free.
			if err := s.Unprepare(n.ctx, refOf(makeClaim(claimSpec{name: "first"}))); err != nil {
				t.Fatal(err)
			}
			mustPrepare(t, n.ctx, s, second)
		})
	}
}

func TestPrepareIsIdempotent(t *testing.T) {
	tests := []struct {
		name string
		// between runs between the two prepares.
		between func(t *testing.T, n *node)
	}{
		{name: "nothing changed", between: func(*testing.T, *node) {}},
		{name: "CDI spec lost", between: func(t *testing.T, n *node) {
			if err := os.Remove(n.specPath(uidOf("again"))); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 2)
			s := n.start()
			claim := makeClaim(claimSpec{name: "again", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0), result("gpu", 1)}})
			first := mustPrepare(t, n.ctx, s, claim)
			spec := n.readSpec(uidOf("again"))
			cp, err := os.ReadFile(n.cpPath)
			if err != nil {
				t.Fatal(err)
			}

			tc.between(t, n)
			second := mustPrepare(t, n.ctx, s, claim)

			if !reflect.DeepEqual(first, second) {
				t.Errorf("second Prepare = %+v, want the first's %+v", second, first)
			}
			if got := n.readSpec(uidOf("again")); !bytes.Equal(got, spec) {
				t.Errorf("CDI spec after the second prepare:\n%s\nwant\n%s", got, spec)
			}
			if got, err := os.ReadFile(n.cpPath); err != nil || !bytes.Equal(got, cp) {
				t.Errorf("second prepare changed the checkpoint (err %v):\n%s\nwas\n%s", err, got, cp)
			}
			if got := s.PreparedClaims(); len(got) != 1 {
				t.Errorf("claims recorded: %v, want one", got)
			}
		})
	}
}

func TestUnprepare(t *testing.T) {
	tests := []struct {
		name    string
		prepare bool // prepare the claim first
		times   int
	}{
		{name: "prepared claim", prepare: true, times: 1},
		{name: "twice", prepare: true, times: 2},
		{name: "unknown claim", times: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 2)
			s := n.start()
			claim := makeClaim(claimSpec{name: "done", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 0)}})
			// A neighbour that must survive.
			mustPrepare(t, n.ctx, s, makeClaim(claimSpec{name: "other", results: []resourceapi.DeviceRequestAllocationResult{result("gpu", 1)}}))
			if tc.prepare {
				mustPrepare(t, n.ctx, s, claim)
			}
			for i := range tc.times {
				if err := s.Unprepare(n.ctx, refOf(claim)); err != nil {
					t.Fatalf("Unprepare #%d: %v", i+1, err)
				}
			}
			if _, err := os.Stat(n.specPath(uidOf("done"))); !os.IsNotExist(err) {
				t.Errorf("CDI spec of the unprepared claim: %v, want it gone", err)
			}
			if _, ok := s.PreparedClaims()[uidOf("done")]; ok {
				t.Error("unprepared claim still recorded in memory")
			}
			if _, ok := n.onDisk()[uidOf("done")]; ok {
				t.Error("unprepared claim still recorded on disk")
			}
			if _, ok := n.onDisk()[uidOf("other")]; !ok {
				t.Error("the other claim was forgotten")
			}
			if files := n.specFiles(); len(files) != 1 {
				t.Errorf("CDI spec files %v, want only the other claim's", files)
			}
		})
	}
}

// TestContainerWithTwoRequests: a container that uses the devices of two
// requests (or two claims) with different configs gets both devices'
// edits, and the driver files of both requests' capabilities.
func TestContainerWithTwoRequests(t *testing.T) {
	n := newNode(t, 2)
	s := n.start()
	claim := makeClaim(claimSpec{
		name:         "two",
		results:      []resourceapi.DeviceRequestAllocationResult{result("a", 0), result("b", 1)},
		claimConfigs: []opaqueConfig{{requests: []string{"b"}, params: gpuConfig("graphics", "utility")}},
	})
	mustPrepare(t, n.ctx, s, claim)
	env := n.inject(deviceID("two", 0), deviceID("two", 1))
	for _, want := range []string{"GPU_0=" + gpuUUID(0), "GPU_1=" + gpuUUID(1)} {
		if !slices.Contains(env, want) {
			t.Errorf("container using both requests lacks %s: %v", want, env)
		}
	}
	caps, _ := envValue(env, "GPUDRA_CAPABILITIES")
	for _, c := range []string{"compute", "utility", "graphics"} {
		if !strings.Contains(caps, c) {
			t.Errorf("the claim's driver files are for %q, want the union of compute,utility and graphics,utility", caps)
		}
	}
}

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

package claimplan

import (
	"errors"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

const (
	driver  = "gpu.gpudra.io"
	domainA = "9f410827-489f-46fd-8203-51266ca08eb7.32766"
	domainB = "0e6a0c1b-5d77-4b8e-9b1f-2d0d6a3b1c55.1"
)

func TestChannelNamesAgree(t *testing.T) {
	if channelPoolPrefix != slicebuilder.ChannelPoolPrefix {
		t.Errorf("channelPoolPrefix %q, slicebuilder's %q", channelPoolPrefix, slicebuilder.ChannelPoolPrefix)
	}
	for _, n := range []int{0, 1, 127, gpu.MaxIMEXChannel} {
		if got, ok := gpu.ParseChannelDeviceName(slicebuilder.ChannelDeviceName(n)); !ok || got != n {
			t.Errorf("ParseChannelDeviceName(%q) = %d, %v", slicebuilder.ChannelDeviceName(n), got, ok)
		}
	}
	for _, bad := range []string{"channel-", "channel-01", "channel-2048", "channel--1", "gpu-0", "channel-x"} {
		if _, ok := gpu.ParseChannelDeviceName(bad); ok {
			t.Errorf("ParseChannelDeviceName(%q) accepted", bad)
		}
	}
}

// channelClaim is a claim allocated one channel of domain's pool.
func channelClaim(name, domain, device string) *resourceapi.ResourceClaim {
	return gpudratest.Allocate(gpudratest.Claim("team", name, gpudratest.Request("channel", "nvlink-channel.gpudra.io", 1)),
		gpudratest.Result("channel", driver, slicebuilder.ChannelPoolName(domain), device))
}

func trayOptions(domain string) Options {
	return Options{DriverName: driver, Node: gpu.Node{Name: "tray-1"}, NVLinkDomain: domain}
}

// TestPlanChannel: the node prepares the channels of its own domain's
// pool, and refuses, naming the claim, the device and both domains, those
// of another domain, and channels with admin access or a gpudra config.
func TestPlanChannel(t *testing.T) {
	planned, err := Plan(trayOptions(domainA), channelClaim("job", domainA, "channel-7"))
	if err != nil {
		t.Fatal(err)
	}
	if len(planned) != 1 || planned[0].Channel == nil || *planned[0].Channel != (gpu.IMEXChannel{Domain: domainA, Number: 7}) {
		t.Fatalf("planned %+v, want channel 7 of domain A", planned)
	}
	if h := planned[0].Held(); h.Channel == nil || *h.Channel != (checkpoint.IMEXChannel{Domain: domainA, Number: 7}) || h.GPUUUID != "" {
		t.Errorf("recorded %+v, want channel 7 of domain A and no GPU", h)
	}

	admin := channelClaim("admin", domainA, "channel-7")
	admin.Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
	configured := channelClaim("configured", domainA, "channel-7")
	configured.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
		Source: resourceapi.AllocationConfigSourceClaim, DeviceConfiguration: gpudratest.OpaqueConfig(driver, `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig"}`),
	}}
	for name, tc := range map[string]struct {
		opts  Options
		claim *resourceapi.ResourceClaim
		kind  Kind
		say   []string
	}{
		"another domain": {trayOptions(domainB), channelClaim("job", domainA, "channel-7"), ForeignDomain,
			[]string{"team/job", "channel-7", domainA, domainB, "tray-1"}},
		"a node in no domain": {trayOptions(""), channelClaim("job", domainA, "channel-7"), ForeignDomain,
			[]string{"team/job", "channel-7", domainA, "no NVLink domain"}},
		"not a channel": {trayOptions(domainA), channelClaim("job", domainA, "gpu-0"), UnknownDevice,
			[]string{"team/job", "gpu-0", "not an IMEX channel"}},
		"admin access":    {trayOptions(domainA), admin, ChannelMisuse, []string{"team/admin", "adminAccess"}},
		"a gpudra config": {trayOptions(domainA), configured, ChannelMisuse, []string{"team/configured", "config"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Plan(tc.opts, tc.claim)
			var r *Refusal
			if !errors.As(err, &r) || r.Kind != tc.kind {
				t.Fatalf("Plan: %v, want a %s refusal", err, tc.kind)
			}
			for _, s := range tc.say {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q does not say %q", err, s)
				}
			}
		})
	}
}

// TestHeldChannel: an exclusive channel another claim holds is refused;
// the shared channel 0 is not, and no channel conflicts with a GPU or
// another channel.
func TestHeldChannel(t *testing.T) {
	plan := func(c *resourceapi.ResourceClaim, share bool) Device {
		t.Helper()
		if share {
			c.Status.Allocation.Devices.Results[0].ShareID = ptr.To(types.UID("0b5c1a6e-5d1f-4d6b-9d8f-2f1e3c4b5a69"))
		}
		planned, err := Plan(trayOptions(domainA), c)
		if err != nil {
			t.Fatal(err)
		}
		return planned[0]
	}
	held := plan(channelClaim("first", domainA, "channel-7"), false).Held()
	if r := HeldConflict(plan(channelClaim("second", domainA, "channel-7"), false), held, "team/first"); r == nil || r.Kind != HeldByOther {
		t.Errorf("channel 7 held by two claims: %v", r)
	}
	if r := HeldConflict(plan(channelClaim("second", domainA, "channel-8"), false), held, "team/first"); r != nil {
		t.Errorf("channels 7 and 8 conflict: %v", r)
	}
	gpuHeld := checkpoint.Device{Pool: "tray-1", Device: "gpu-0", GPUUUID: "GPU-1"}
	if r := HeldConflict(plan(channelClaim("second", domainA, "channel-8"), false), gpuHeld, "team/gpu"); r != nil {
		t.Errorf("a channel conflicts with a GPU: %v", r)
	}
	shared := plan(channelClaim("first", domainA, "channel-0"), true).Held()
	second := channelClaim("second", domainA, "channel-0")
	second.Status.Allocation.Devices.Results[0].ShareID = ptr.To(types.UID("7e0d2b4c-1a3f-4c5e-8b6d-0f9e8d7c6b5a"))
	planned, err := Plan(trayOptions(domainA), second)
	if err != nil {
		t.Fatalf("a second share of channel 0: %v", err)
	}
	if r := HeldConflict(planned[0], shared, "team/first"); r != nil {
		t.Errorf("the shared channel 0 held by two claims: %v", r)
	}
}

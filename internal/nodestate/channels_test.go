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
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

const (
	domainA = "9f410827-489f-46fd-8203-51266ca08eb7.32766"
	domainB = "0e6a0c1b-5d77-4b8e-9b1f-2d0d6a3b1c55.1"
	// channelMajor stands in for the major /proc/devices gives
	// nvidia-caps-imex-channels (dynamic; NVIDIA's IMEX guide shows 234).
	channelMajor = 234
)

// fakeChannels gives a channel its node as the real backend does, with a
// fixed major and /dev/null on the host.
type fakeChannels struct{}

func (fakeChannels) IMEXChannelEdits(ch gpu.IMEXChannel) (gpu.Edits, error) {
	return gpu.Edits{DeviceNodes: []gpu.DeviceNode{{Path: ch.DevicePath(), HostPath: "/dev/null", Type: "c", Major: channelMajor, Minor: int64(ch.Number)}}}, nil
}

func channelResult(domain string, n int) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: "channel", Driver: testDriver,
		Pool: slicebuilder.ChannelPoolName(domain), Device: slicebuilder.ChannelDeviceName(n)}
}

// TestPrepareChannel: a claim with a channel of the node's domain gets a
// spec with the channel's character device and its domain and channel in
// the environment, recorded; a second prepare returns the same; unprepare
// removes the spec and the record.
func TestPrepareChannel(t *testing.T) {
	n := newNode(t, 1)
	n.domain = domainA
	s := n.start()
	claim := makeClaim(claimSpec{name: "job", results: []resourceapi.DeviceRequestAllocationResult{channelResult(domainA, 5), result("gpu", 0)}})
	prepared, err := s.Prepare(n.ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range prepared {
		ids = append(ids, p.CDIDeviceIDs...)
	}
	env := n.inject(ids...)
	for key, want := range map[string]string{EnvNVLinkDomain: domainA, EnvIMEXChannel: "5"} {
		if got, _ := envValue(env, key); got != want {
			t.Errorf("%s=%q, want %q", key, got, want)
		}
	}
	spec := string(n.readSpec(uidOf("job")))
	for _, want := range []string{"path: /dev/nvidia-caps-imex-channels/channel5", "type: c", fmt.Sprintf("major: %d", channelMajor), "minor: 5"} {
		if !strings.Contains(spec, want) {
			t.Errorf("the CDI spec lacks %q:\n%s", want, spec)
		}
	}
	rec := n.onDisk()[uidOf("job")]
	i := slices.IndexFunc(rec.Devices, func(d checkpoint.Device) bool { return d.Channel != nil })
	if i < 0 || *rec.Devices[i].Channel != (checkpoint.IMEXChannel{Domain: domainA, Number: 5}) || rec.Devices[i].GPUUUID != "" {
		t.Fatalf("checkpoint records %+v, want channel 5 of domain A without a GPU", rec.Devices)
	}
	if inUse := s.GPUsInUse(); len(inUse) != 1 {
		t.Errorf("GPUs in use %v, want the one GPU only", inUse)
	}

	// A plugin restart rewrites nothing and prepares it again the same.
	s, _ = n.restart()
	again, err := s.Prepare(n.ctx, claim)
	if err != nil || len(again) != len(prepared) {
		t.Fatalf("second prepare: %v, %v", again, err)
	}
	if got := string(n.readSpec(uidOf("job"))); got != spec {
		t.Errorf("the spec changed on a second prepare:\n%s\nwas\n%s", got, spec)
	}
	if err := s.Unprepare(n.ctx, refOf(claim)); err != nil {
		t.Fatal(err)
	}
	if files := n.specFiles(); len(files) != 0 {
		t.Errorf("spec files left after unprepare: %v", files)
	}
	if _, ok := n.onDisk()[uidOf("job")]; ok {
		t.Error("the claim is still recorded after unprepare")
	}
}

// TestPrepareChannelRefused: another domain's channel, or a channel while
// the IMEX daemon is not ready, is refused before anything is recorded;
// one exclusive channel is not prepared for two claims, the shared one is.
func TestPrepareChannelRefused(t *testing.T) {
	n := newNode(t, 1)
	n.domain = domainB
	s := n.start()
	if _, err := s.Prepare(n.ctx, makeClaim(claimSpec{name: "other", results: []resourceapi.DeviceRequestAllocationResult{channelResult(domainA, 5)}})); err == nil ||
		!strings.Contains(err.Error(), domainA) || !strings.Contains(err.Error(), domainB) {
		t.Errorf("a channel of domain A on a node of domain B: %v", err)
	}

	n.domain = domainA
	n.imex = notReady{}
	s = n.start()
	if _, err := s.Prepare(n.ctx, makeClaim(claimSpec{name: "early", results: []resourceapi.DeviceRequestAllocationResult{channelResult(domainA, 5)}})); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("a channel while the IMEX daemon is not ready: %v", err)
	}
	if len(n.onDisk()) != 0 || len(n.specFiles()) != 0 {
		t.Errorf("refused claims left records %v or specs %v", n.onDisk(), n.specFiles())
	}

	n.imex = nil
	s = n.start()
	if _, err := s.Prepare(n.ctx, makeClaim(claimSpec{name: "first", results: []resourceapi.DeviceRequestAllocationResult{channelResult(domainA, 5)}})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prepare(n.ctx, makeClaim(claimSpec{name: "second", results: []resourceapi.DeviceRequestAllocationResult{channelResult(domainA, 5)}})); err == nil {
		t.Error("channel 5 prepared for two claims")
	}
	shared := func(name, shareID string) *resourceapi.ResourceClaim {
		r := channelResult(domainA, 0)
		r.ShareID = ptr.To(types.UID(shareID))
		return makeClaim(claimSpec{name: name, results: []resourceapi.DeviceRequestAllocationResult{r}})
	}
	for _, c := range []*resourceapi.ResourceClaim{shared("coop-1", "0b5c1a6e-5d1f-4d6b-9d8f-2f1e3c4b5a69"), shared("coop-2", "7e0d2b4c-1a3f-4c5e-8b6d-0f9e8d7c6b5a")} {
		if _, err := s.Prepare(n.ctx, c); err != nil {
			t.Errorf("shared channel 0 for %s: %v", c.Name, err)
		}
	}
}

type notReady struct{}

func (notReady) Ready(context.Context, string) error {
	return errors.New("the daemon does not answer READY")
}

// TestChannelCrashAndReboot: a plugin that dies half-way through a
// channel's prepare leaves nothing once restarted (the kubelet's retry
// prepares it in full); a reboot that lost the spec of a prepared channel
// gets the very same spec back from the checkpoint.
func TestChannelCrashAndReboot(t *testing.T) {
	crash := errors.New("simulated crash")
	n := newNode(t, 1)
	n.domain = domainA
	// On a fresh node (no checkpoint file yet) a channel claim is recorded
	// PrepareStarted first, and a crash before it completes is rolled
	// back: a spec without any checkpoint would read as a lost checkpoint.
	first := makeClaim(claimSpec{name: "first", results: []resourceapi.DeviceRequestAllocationResult{channelResult(domainA, 8)}})
	n.hooks.BeforePrepareCompleted = func(string) error { return crash }
	if _, err := n.start().Prepare(n.ctx, first); !errors.Is(err, crash) {
		t.Fatalf("Prepare = %v, want the simulated crash", err)
	}
	n.hooks = Hooks{}
	s, report := n.restart()
	if len(report.RolledBack) != 1 || len(n.onDisk()) != 0 || len(n.specFiles()) != 0 {
		t.Fatalf("after the crash on a fresh node and a restart: report %+v, records %v, specs %v; want the claim rolled back, nothing left", report, n.onDisk(), n.specFiles())
	}
	if _, err := s.Prepare(n.ctx, first); err != nil {
		t.Fatalf("the kubelet's retry: %v", err)
	}

	// Once the checkpoint exists, a channel claim is recorded once,
	// complete: a crash before that leaves its spec and no record, and
	// start-up removes the spec as stale.
	claim := makeClaim(claimSpec{name: "job", results: []resourceapi.DeviceRequestAllocationResult{channelResult(domainA, 9)}})
	n.hooks.BeforePrepareCompleted = func(string) error { return crash }
	s, _ = n.restart()
	if _, err := s.Prepare(n.ctx, claim); !errors.Is(err, crash) {
		t.Fatalf("Prepare = %v, want the simulated crash", err)
	}
	if _, recorded := n.onDisk()[uidOf("job")]; recorded || len(n.specFiles()) != 2 {
		t.Fatalf("after the crash: records %v, specs %v; want job's spec and no record of it", n.onDisk(), n.specFiles())
	}
	n.hooks = Hooks{}
	s, report = n.restart()
	if len(report.RemovedStale) != 1 || report.RemovedStale[0] != uidOf("job") || len(n.onDisk()) != 1 || len(n.specFiles()) != 1 {
		t.Fatalf("after the crash and a restart: report %+v, records %v, specs %v; want job's stale spec removed, first's kept", report, n.onDisk(), n.specFiles())
	}
	if _, err := s.Prepare(n.ctx, claim); err != nil {
		t.Fatalf("the kubelet's retry: %v", err)
	}
	spec := n.readSpec(uidOf("job"))
	if err := os.Remove(n.specPath(uidOf("job"))); err != nil {
		t.Fatal(err)
	}
	n.bootID = "boot-2"
	if _, report := n.restart(); len(report.Rewritten) != 1 {
		t.Errorf("after a reboot: %+v, want the spec rewritten", report)
	}
	if got := n.readSpec(uidOf("job")); string(got) != string(spec) {
		t.Errorf("rewritten spec:\n%s\nwant the original:\n%s", got, spec)
	}
}

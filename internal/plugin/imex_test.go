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

package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// wantedIMEXReady is the imexReady of every whole GPU the plugin wants
// published ("" where a GPU carries none).
func wantedIMEXReady(d *Driver) []string {
	d.pub.publishMu.Lock()
	defer d.pub.publishMu.Unlock()
	if d.pub.steps.wanted == nil {
		return nil
	}
	var out []string
	for _, s := range d.pub.steps.wanted.Slices {
		for _, dev := range s.Devices {
			a, ok := dev.Attributes[slicebuilder.AttrType]
			if !ok || a.StringValue == nil || *a.StringValue != slicebuilder.TypeGPU {
				continue
			}
			v := ""
			if r, ok := dev.Attributes[slicebuilder.AttrIMEXReady]; ok && r.BoolValue != nil {
				v = map[bool]string{true: "true", false: "false"}[*r.BoolValue]
			}
			out = append(out, v)
		}
	}
	return out
}

func allAre(vs []string, want string) bool {
	for _, v := range vs {
		if v != want {
			return false
		}
	}
	return len(vs) > 0
}

// With --imex-daemon=host a tray publishes what its IMEX daemon answers:
// ready from the first publish on, not ready (with an Event, and
// channels refused at prepare) within a few intervals of the daemon
// hanging.
func TestIMEXDaemonReadiness(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	daemon, socket := gpudratest.IMEXDaemon(t)
	cfg := startConfigProfile(t, "gb200-tray")
	cfg.IMEXDaemon, cfg.IMEXSocket, cfg.IMEXCheckInterval = IMEXDaemonHost, socket, 50*time.Millisecond
	// The stand-in's nvidia-imex-ctl is this test binary started again,
	// which takes seconds under the race detector on a loaded machine: a
	// slow start must not read as a hung daemon.
	cfg.IMEXQueryTimeout = 10 * time.Second
	d, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	domain := d.pub.currentDomain()
	if !domain.InDomain() {
		t.Fatalf("the gb200-tray profile is in no NVLink domain: %+v", domain)
	}
	// Start asked the daemon before its first publish, so that says ready
	// unless the query took longer than its timeout (a loaded machine):
	// wait for it rather than assert on how fast a process started.
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return allAre(wantedIMEXReady(d), "true"), nil
	}); err != nil {
		t.Fatalf("imexReady of the GPUs with the daemon serving: %v, want true on all", wantedIMEXReady(d))
	}
	if err := d.pub.imexReadiness().Ready(ctx, domain.Name); err != nil {
		t.Errorf("a prepare's readiness check with the daemon ready: %v", err)
	}

	daemon.Hang()
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return allAre(wantedIMEXReady(d), "false"), nil
	}); err != nil {
		t.Fatalf("imexReady after the daemon hung: %v, want false on all", wantedIMEXReady(d))
	}
	err = d.pub.imexReadiness().Ready(ctx, domain.Name)
	if err == nil || !strings.Contains(err.Error(), domain.Name) || !strings.Contains(err.Error(), socket) {
		t.Errorf("a prepare's readiness check with the daemon hung: %v, want an error naming the domain and the socket", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := cfg.KubeClient.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == ReasonIMEXDaemonNotReady && e.InvolvedObject.Kind == "Node" && strings.Contains(e.Message, domain.Name) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Errorf("no %s Event on the Node: %v", ReasonIMEXDaemonNotReady, err)
	}
}

// With --imex-daemon=none the plugin asks nothing and publishes no
// imexReady: gpudra-controller counts the node as ready.
func TestIMEXDaemonNone(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cfg := startConfigProfile(t, "gb200-tray")
	cfg.IMEXDaemon = IMEXDaemonNone
	d, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	if got := wantedIMEXReady(d); !allAre(got, "") {
		t.Errorf("imexReady with --imex-daemon=none: %v, want none", got)
	}
	if err := d.pub.imexReadiness().Ready(ctx, d.pub.currentDomain().Name); err != nil {
		t.Errorf("readiness with --imex-daemon=none: %v", err)
	}
	if err := ValidateIMEXDaemon("managed"); err == nil {
		t.Error("--imex-daemon=managed accepted: no managed daemon exists")
	}
}

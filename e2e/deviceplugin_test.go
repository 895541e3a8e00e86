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
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/internal/plugin"
)

// devicePluginConflict fakes NVIDIA's device plugin on the node as the
// kubelet shows it: nvidia.com/gpu in the Node's status capacity and
// allocatable (patched through the status subresource, as a device plugin's
// registration makes the kubelet write it; the kubelet keeps extended
// resources it did not add). The plugin withdraws every device of the node,
// records the Warning Event on the Node, and publishes the devices again
// once the resource is gone.
func (e *env) devicePluginConflict(ctx context.Context, t *testing.T) {
	before := len(e.devicesByName(ctx, t))
	if before == 0 {
		t.Fatal("the node publishes no devices before the test")
	}
	patch := func(value string) {
		t.Helper()
		p := `{"status":{"capacity":{"nvidia.com/gpu":` + value + `},"allocatable":{"nvidia.com/gpu":` + value + `}}}`
		if out, err := e.kubectlRun(ctx, "patch", "node", e.node, "--subresource=status", "--type=merge", "-p", p); err != nil {
			t.Fatalf("kubectl patch node %s --subresource=status: %v\n%s", e.node, err, out)
		}
	}
	removed := false
	defer func() {
		if !removed {
			cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _ = e.kubectlRun(cctx, "patch", "node", e.node, "--subresource=status", "--type=merge", "-p",
				`{"status":{"capacity":{"nvidia.com/gpu":null},"allocatable":{"nvidia.com/gpu":null}}}`)
		}
	}()

	start := time.Now()
	patch(`"8"`)
	// The plugin reads its Node every 30 s.
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		sl, err := e.slices(ctx)
		n := 0
		for _, s := range sl {
			n += len(s.Spec.Devices)
		}
		return err == nil && n == 0, err
	}); err != nil {
		t.Fatalf("the node still publishes devices while its Node advertises nvidia.com/gpu: %v", err)
	}
	record(t, t.Name()+": nvidia.com/gpu on the Node → no device published", time.Since(start))
	if err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		list, err := e.cs.CoreV1().Events("").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + e.node + ",reason=" + plugin.ReasonDevicePluginConflict,
		})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Type == "Warning" && strings.Contains(ev.Message, "nvidia.com/gpu=8") &&
				strings.Contains(ev.Message, "nvidia.com/gpu.deploy.device-plugin=false") && ev.LastTimestamp.Add(time.Minute).After(start) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Errorf("no Warning Event %s on Node %s saying how to turn the device plugin off: %v", plugin.ReasonDevicePluginConflict, e.node, err)
	}

	start = time.Now()
	patch("null")
	removed = true
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		return len(e.devicesByName(ctx, t)) == before, nil
	}); err != nil {
		t.Fatalf("the node does not publish its %d devices again after nvidia.com/gpu left the Node (%d now): %v", before, len(e.devicesByName(ctx, t)), err)
	}
	record(t, t.Name()+": nvidia.com/gpu gone → devices published again", time.Since(start))
}

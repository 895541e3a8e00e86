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

package check

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// migPodYAML is a pod asking for one 1g.10gb partition.
const migPodYAML = `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: slice}
spec:
  spec:
    devices:
      requests:
      - {name: mig, exactly: {deviceClassName: mig-1g.10gb.gpudra.io}}
---
apiVersion: v1
kind: Pod
metadata: {name: notebook}
spec:
  containers: [{name: nb, image: x, resources: {claims: [{name: mig}]}}]
  resourceClaims: [{name: mig, resourceClaimTemplateName: slice}]
`

// loadYAML decodes manifests written to a file of the test.
func loadYAML(t *testing.T, doc string) *scheduler.Manifests {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := scheduler.LoadPaths([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestReportSaysSpares: every report says what check assumes about MIG
// spares, whichever the inventory's source.
func TestReportSaysSpares(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    func(Options) Options
		version string
		want    []string
	}{
		{name: "fake nodes that republish", opts: func(o Options) Options { return onProfile(t, "dgx-h100", 1, o) },
			want: []string{"1 of the 1 node(s) with a GPU that can take a MIG spare publish MIG placements", "makes the next free GPU a spare once prepared", "a gang sees only what is published before it binds"}},
		{name: "fake nodes in fleet mode", opts: func(o Options) Options {
			o = onProfile(t, "dgx-h100", 1, o)
			o.SpareGPUs, o.SpareNodes = "fleet", 1
			return o
		}, want: []string{"--mig-spare-gpus=fleet: gpudra-controller keeps a spare on 1 node(s)", "waits-for-spare"}},
		{name: "slices from files", opts: func(o Options) Options { o.Slices = fakeInventory(t, "dgx-h100", 2); return o },
			want: []string{"2 of the 2 node(s)", "check does not know the plugin's --mig-spare-gpus", "not modelled"}},
		{name: "no partitionable devices", version: "1.35", opts: func(o Options) Options { return onProfile(t, "dgx-h100", 1, o) },
			want: []string{"none: Kubernetes 1.35 does not serve partitionable devices"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts(Options{Inputs: loadYAML(t, migPodYAML), BuiltinClasses: true, KubernetesVersion: tc.version})
			rep, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(rep.Inventory.Spares, w) {
					t.Errorf("spares %q does not say %q", rep.Inventory.Spares, w)
				}
			}
			var text strings.Builder
			if err := rep.WriteText(&text, false); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), "\n  spares: "+rep.Inventory.Spares+"\n") {
				t.Errorf("the text report has no spares line:\n%s", text.String())
			}
		})
	}
}

// TestSlicesAtOldVersionsPublishWholeGPUs: slices read from files (or a
// cluster) at a Kubernetes version without partitionable devices are
// taken as the plugin publishes there, whole GPUs only; the API server's
// dropping the counters alone would leave partitions that overlap.
func TestSlicesAtOldVersionsPublishWholeGPUs(t *testing.T) {
	for _, version := range []string{"1.34", "1.35"} {
		t.Run(version, func(t *testing.T) {
			rep, err := Run(context.Background(), Options{Inputs: loadYAML(t, migPodYAML), BuiltinClasses: true, KubernetesVersion: version,
				Slices: fakeInventory(t, "dgx-h100", 1)})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Inventory.Devices != 16 {
				t.Errorf("%d devices, want 16 (8 whole GPUs, 8 monitoring devices)", rep.Inventory.Devices)
			}
			if c := claim(t, rep, "default/notebook-mig"); c.Allocation != nil {
				t.Errorf("the MIG claim got %+v on whole GPUs only", c.Allocation)
			}
			if !strings.Contains(strings.Join(rep.Inventory.Notes, "\n"), "MIG placement(s) of gpu.gpudra.io left out") {
				t.Errorf("no note says the placements are left out: %q", rep.Inventory.Notes)
			}
		})
	}
}

// inventoryYAML is the slices as `gpudra inventory` prints them: whole
// ResourceSlice objects, one YAML document each.
func inventoryYAML(t *testing.T, slices []*resourceapi.ResourceSlice) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# The ResourceSlices gpudra's kubelet plugin publishes for node node-1\n")
	for _, s := range slices {
		c := s.DeepCopy()
		c.TypeMeta = metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"}
		data, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.String()
}

// twoWholePartitionsYAML are two pods, each asking for a 7g.80gb
// partition: a whole spare each.
const twoWholePartitionsYAML = `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: big}
spec:
  spec:
    devices:
      requests:
      - {name: mig, exactly: {deviceClassName: mig-7g.80gb.gpudra.io}}
---
apiVersion: v1
kind: Pod
metadata: {name: first}
spec:
  containers: [{name: c, image: x, resources: {claims: [{name: mig}]}}]
  resourceClaims: [{name: mig, resourceClaimTemplateName: big}]
---
apiVersion: v1
kind: Pod
metadata: {name: second}
spec:
  containers: [{name: c, image: x, resources: {claims: [{name: mig}]}}]
  resourceClaims: [{name: mig, resourceClaimTemplateName: big}]
`

// TestRefillOnInventoryFile (issue 30, item 3): a sequential check over
// a `gpudra inventory` file of a node that keeps one spare places a
// second 7g.80gb pod on the GPU its plugin makes a spare once the first
// is prepared, as it does on a profile's fake nodes; the refill is
// modelled by editing the file's slices (EditRefill), and the report
// says so. Without EditRefill the second pod fits nowhere.
func TestRefillOnInventoryFile(t *testing.T) {
	inventory := inventoryYAML(t, fakeInventory(t, "dgx-h100", 1))
	for _, edited := range []bool{false, true} {
		t.Run(fmt.Sprintf("edited=%v", edited), func(t *testing.T) {
			o := Options{Inputs: loadYAML(t, inventory+"---\n"+twoWholePartitionsYAML), BuiltinClasses: true, Sequential: true}
			if edited {
				if err := EditRefill(&o); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			first, second := claim(t, rep, "default/first-mig"), claim(t, rep, "default/second-mig")
			if first.Allocation == nil {
				t.Fatalf("the first pod's partition is not allocated: %+v", first)
			}
			if !edited {
				if second.Allocation != nil {
					t.Errorf("without the refill the second partition got %+v", second.Allocation)
				}
				if !strings.Contains(rep.Inventory.Spares, "not modelled") {
					t.Errorf("spares %q", rep.Inventory.Spares)
				}
				return
			}
			if second.Allocation == nil {
				t.Fatalf("the second pod's partition is not allocated once the spare is refilled: %+v\n%s", second, describeFindings(rep))
			}
			a, b := first.Allocation.Devices[0].Device, second.Allocation.Devices[0].Device
			if a != "gpu-7-mig-7g80gb-0" || b != "gpu-6-mig-7g80gb-0" {
				t.Errorf("partitions %s and %s, want gpu-7's then gpu-6's, as the plugin's spares go", a, b)
			}
			for _, w := range []string{"modelled by editing the published slices", "check does not know whether gpudra-controller gives these nodes spares"} {
				if !strings.Contains(rep.Inventory.Spares, w) {
					t.Errorf("spares %q does not say %q", rep.Inventory.Spares, w)
				}
			}
		})
	}
}

// TestEditRefillWholeGPUsOnly: where the version serves no partitionable
// devices the plugin publishes whole GPUs only: nothing to refill.
func TestEditRefillWholeGPUsOnly(t *testing.T) {
	o := Options{KubernetesVersion: "1.35", Slices: fakeInventory(t, "dgx-h100", 1)}
	if err := EditRefill(&o); err != nil {
		t.Fatal(err)
	}
	if o.Republish != nil || o.Spare != nil || o.RefillEdited {
		t.Error("a refill is modelled on Kubernetes 1.35, which serves no partitionable devices")
	}
}

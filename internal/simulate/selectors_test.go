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
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/nvmlfake"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// namedSelector is a CEL selector and where it comes from. A request's
// selector is evaluated, as the scheduler does, only on the devices its
// DeviceClass selects.
type namedSelector struct {
	where, expr string
	class       *resourceapi.DeviceClass
}

// shippedSelectors are the selectors of every DeviceClass gpudra ships
// and of every request (and firstAvailable alternative) of its examples.
func shippedSelectors(t *testing.T) []namedSelector {
	t.Helper()
	classes, err := LoadDeviceClasses(deviceclasses.FS)
	if err != nil {
		t.Fatal(err)
	}
	var out []namedSelector
	add := func(where string, class *resourceapi.DeviceClass, sels []resourceapi.DeviceSelector) {
		for i, s := range sels {
			if s.CEL != nil {
				out = append(out, namedSelector{fmt.Sprintf("%s selector %d", where, i), s.CEL.Expression, class})
			}
		}
	}
	classByName := map[string]*resourceapi.DeviceClass{}
	for _, c := range classes {
		classByName[c.Name] = c
		add("DeviceClass "+c.Name, nil, c.Spec.Selectors)
	}
	examples, err := LoadExamples(deviceclasses.FS)
	if err != nil {
		t.Fatal(err)
	}
	addSpec := func(where string, spec resourceapi.ResourceClaimSpec) {
		for _, r := range spec.Devices.Requests {
			if r.Exactly != nil {
				add(where+" request "+r.Name, classOf(t, classByName, r.Exactly.DeviceClassName), r.Exactly.Selectors)
			}
			for _, sub := range r.FirstAvailable {
				add(where+" request "+r.Name+"/"+sub.Name, classOf(t, classByName, sub.DeviceClassName), sub.Selectors)
			}
		}
	}
	for _, ex := range examples {
		for _, tmpl := range ex.Templates {
			addSpec(ex.File+" template "+tmpl.Name, tmpl.Spec.Spec)
		}
		for _, claim := range ex.Claims {
			addSpec(ex.File+" claim "+claim.Name, claim.Spec)
		}
	}
	return out
}

func classOf(t *testing.T, classes map[string]*resourceapi.DeviceClass, name string) *resourceapi.DeviceClass {
	t.Helper()
	c, ok := classes[name]
	if !ok {
		t.Fatalf("an example uses DeviceClass %q, which gpudra does not ship", name)
	}
	return c
}

// profileDevices are the devices the plugin publishes for a fake profile,
// with the standard topology attributes from the fake's sysfs.
func profileDevices(t *testing.T, profile string) []resourceapi.Device {
	t.Helper()
	be, err := backend.Open(context.Background(), backend.Options{
		Kind: "fake", NodeName: "node-1", FakeProfile: profile, FakeStateDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	node, err := be.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := slicebuilder.Build(node, slicebuilder.Options{DriverName: "gpu.gpudra.io", SysfsRoot: be.SysfsRoot()})
	if err != nil {
		t.Fatal(err)
	}
	var out []resourceapi.Device
	for _, s := range res.Pools["node-1"].Slices {
		out = append(out, s.Devices...)
	}
	return out
}

// TestSelectorsEvaluateOnEveryDevice evaluates every selector gpudra
// ships on every device of its DeviceClass, and, for each type of device
// (whole GPU, MIG partition, monitor), a selector on each attribute the
// type has on every device of that type, on every fake profile: none may
// fail with a run-time error. The scheduler evaluates a claim's selectors
// on every device its class admits, and one run-time error (an attribute
// the device lacks, a type mismatch) fails the whole allocation attempt;
// so every device of one type carries the same attribute keys, and
// gpudra's DeviceClasses admit one type each. (A MIG partition carries
// fewer attributes than its GPU: a selector that reads a whole GPU's
// attribute without a class that selects whole GPUs fails on partitions,
// and gpudra check says so.)
func TestSelectorsEvaluateOnEveryDevice(t *testing.T) {
	selectors := shippedSelectors(t)
	if len(selectors) < 10 {
		t.Fatalf("only %d shipped selectors found", len(selectors))
	}
	profiles := append(nvmlfake.Profiles(), filepath.Join("testdata", "profiles", "dgx-a100-mig.yaml"))
	compiler := cel.GetCompiler(cel.Features{})
	for _, profile := range profiles {
		t.Run(filepath.Base(profile), func(t *testing.T) {
			devices := profileDevices(t, profile)
			tests := slices.Clone(selectors)
			// One selector per attribute of each type, guarded by the type.
			seen := map[string]bool{}
			migs := 0
			for _, d := range devices {
				typ := *d.Attributes[slicebuilder.AttrType].StringValue
				if typ == slicebuilder.TypeMIG {
					migs++
				}
				for name := range d.Attributes {
					if seen[typ+"/"+string(name)] {
						continue
					}
					seen[typ+"/"+string(name)] = true
					domain, id := "gpu.gpudra.io", string(name)
					if dom, short, ok := cutQualified(string(name)); ok {
						domain, id = dom, short
					}
					tests = append(tests, namedSelector{
						where: typ + " attribute " + string(name),
						expr: fmt.Sprintf("device.attributes['gpu.gpudra.io'].type == %q && device.attributes[%q].%s == device.attributes[%q].%s",
							typ, domain, id, domain, id),
					})
				}
			}
			// dgx-a100 starts with MIG off; the fake gb200 has no MIG
			// table (no public -lgip of a GB200).
			if migs == 0 && profile != "dgx-a100" && profile != "gb200-tray" {
				t.Fatalf("profile %s publishes no MIG devices: the test would not cover them", profile)
			}
			compiled := map[string]cel.CompilationResult{}
			eval := func(where, expr string, d resourceapi.Device) bool {
				prog, ok := compiled[expr]
				if !ok {
					prog = compiler.CompileCELExpression(expr, cel.Options{})
					compiled[expr] = prog
				}
				if prog.Error != nil {
					t.Fatalf("%s: compile %q: %v", where, expr, prog.Error)
				}
				ok, _, err := prog.DeviceMatches(context.Background(), cel.Device{Driver: "gpu.gpudra.io", Attributes: d.Attributes, Capacity: d.Capacity})
				if err != nil {
					t.Errorf("%s on device %s: %v", where, d.Name, cel.EnhanceRuntimeError(err))
				}
				return ok
			}
			for _, sel := range tests {
				for _, d := range devices {
					inClass := true
					if sel.class != nil {
						for i, cs := range sel.class.Spec.Selectors {
							inClass = inClass && eval(fmt.Sprintf("DeviceClass %s selector %d", sel.class.Name, i), cs.CEL.Expression, d)
						}
					}
					if inClass {
						eval(sel.where, sel.expr, d)
					}
				}
			}
		})
	}
}

// cutQualified splits "resource.kubernetes.io/pciBusID" into its domain
// and name.
func cutQualified(name string) (domain, id string, ok bool) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[:i], name[i+1:], true
		}
	}
	return "", "", false
}

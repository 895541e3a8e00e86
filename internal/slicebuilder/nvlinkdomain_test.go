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

package slicebuilder

import (
	"context"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/gpudra/gpudra/internal/gpu"
)

// tray is a GB200-like node of four GPUs (H100 fixtures with fabric and
// platform readings) whose fabric is edited by edit.
func tray(edit func(i int, g *gpu.GPU)) gpu.Node {
	node := gpu.Node{Name: "tray", DriverVersion: "580.173.02", CUDADriverVersion: "13.0"}
	for i := range 4 {
		g := h100(i, i, 0, "")
		g.Fabric = gpu.Fabric{State: gpu.FabricCompleted, Status: "SUCCESS", ClusterUUID: "9f410827-0000-4000-8000-000000000001", CliqueID: 32766, Health: gpu.FabricHealthy}
		g.Platform = gpu.Platform{Known: true, TrayIndex: 15, ModuleID: []int{2, 1, 4, 3}[i], ModuleIDKnown: true}
		if edit != nil {
			edit(i, &g)
		}
		node.GPUs = append(node.GPUs, g)
	}
	return node
}

func devicesByName(t *testing.T, node gpu.Node) map[string]resourceapi.Device {
	t.Helper()
	res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: noSysfs})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]resourceapi.Device{}
	for _, pool := range res.Pools {
		for _, s := range pool.Slices {
			for _, d := range s.Devices {
				out[d.Name] = d
			}
		}
	}
	return out
}

// Every whole GPU (and its monitoring device) of a node in an NVLink
// domain carries the domain, its parts, its tray and its module; the MIG
// placements do not.
func TestNVLinkDomainAttributes(t *testing.T) {
	devices := devicesByName(t, tray(nil))
	for i, name := range []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"} {
		for _, dn := range []string{name, name + "-monitor"} {
			a := devices[dn].Attributes
			if got := attrString(a[AttrNVLinkDomain]); got != "string 9f410827-0000-4000-8000-000000000001.32766" {
				t.Errorf("%s nvlinkDomain = %s", dn, got)
			}
			if got := attrString(a[AttrNVLinkClusterUUID]); got != "string 9f410827-0000-4000-8000-000000000001" {
				t.Errorf("%s nvlinkClusterUUID = %s", dn, got)
			}
			if v := a[AttrNVLinkCliqueID].IntValue; v == nil || *v != 32766 {
				t.Errorf("%s nvlinkCliqueID = %s", dn, attrString(a[AttrNVLinkCliqueID]))
			}
			if v := a[AttrTrayIndex].IntValue; v == nil || *v != 15 {
				t.Errorf("%s trayIndex = %s", dn, attrString(a[AttrTrayIndex]))
			}
			if v := a[AttrModuleID].IntValue; v == nil || *v != int64([]int{2, 1, 4, 3}[i]) {
				t.Errorf("%s moduleID = %s", dn, attrString(a[AttrModuleID]))
			}
		}
	}
	for name, d := range devices {
		if p, ok := gpu.ParseDeviceName(name); ok && p.MIG {
			if _, ok := d.Attributes[AttrNVLinkDomain]; ok {
				t.Errorf("MIG placement %s carries nvlinkDomain", name)
			}
		}
	}
}

// A node whose fabric is not ready publishes its GPUs without any of the
// domain's attributes, as a node outside any fabric does.
func TestNoNVLinkDomainAttributesOutsideADomain(t *testing.T) {
	for name, node := range map[string]gpu.Node{
		"probe in progress on one GPU": tray(func(i int, g *gpu.GPU) {
			if i == 2 {
				g.Fabric.State = gpu.FabricInProgress
			}
		}),
		"unhealthy": tray(func(i int, g *gpu.GPU) {
			if i == 0 {
				g.Fabric.Health = gpu.FabricUnhealthy
			}
		}),
		"no fabric": tray(func(_ int, g *gpu.GPU) {
			g.Fabric, g.Platform = gpu.Fabric{State: gpu.FabricNotSupported}, gpu.Platform{}
		}),
	} {
		t.Run(name, func(t *testing.T) {
			for dn, d := range devicesByName(t, node) {
				for _, attr := range []resourceapi.QualifiedName{AttrNVLinkDomain, AttrNVLinkClusterUUID, AttrNVLinkCliqueID, AttrTrayIndex, AttrModuleID} {
					if _, ok := d.Attributes[attr]; ok {
						t.Errorf("%s carries %s", dn, attr)
					}
				}
			}
		})
	}
}

// The selector the docs give finds a domain's GPUs and is false, not an
// error, on the GPUs of nodes outside any domain; the plain read fails
// there, which is why the docs give the other.
func TestNVLinkDomainSelector(t *testing.T) {
	inDomain := devicesByName(t, tray(nil))
	outside := devicesByName(t, mixedNode())
	compiler := cel.GetCompiler(cel.Features{})
	eval := func(expr string, d resourceapi.Device) (bool, error) {
		prog := compiler.CompileCELExpression(expr, cel.Options{})
		if prog.Error != nil {
			t.Fatalf("compile %s: %v", expr, prog.Error)
		}
		ok, _, err := prog.DeviceMatches(context.Background(), cel.Device{Driver: testDriver, Attributes: d.Attributes, Capacity: d.Capacity})
		return ok, err
	}
	const safe = `device.attributes['gpu.gpudra.io'].?nvlinkDomain.orValue('') == '9f410827-0000-4000-8000-000000000001.32766'`
	if ok, err := eval(safe, inDomain["gpu-0"]); !ok || err != nil {
		t.Errorf("a GPU of the domain: %v, %v", ok, err)
	}
	if ok, err := eval(safe, outside["gpu-0"]); ok || err != nil {
		t.Errorf("a GPU outside any domain: %v, %v; want false and no error", ok, err)
	}
	if _, err := eval(`device.attributes['gpu.gpudra.io'].nvlinkDomain == 'x'`, outside["gpu-0"]); err == nil {
		t.Error("the plain read of a missing nvlinkDomain did not fail: the docs' advice is moot")
	}
}

// The IMEX daemon's readiness is published on the GPUs of a node in a
// domain only where the plugin checks the daemon, and only there: a node
// in no domain has no daemon that matters.
func TestIMEXReadyAttribute(t *testing.T) {
	for _, tc := range []struct {
		name  string
		node  gpu.Node
		ready *bool
		want  string
	}{
		{"not checked", tray(nil), nil, "<nil>"},
		{"ready", tray(nil), ptrTo(true), "bool true"},
		{"not ready", tray(nil), ptrTo(false), "bool false"},
		{"no domain", tray(func(_ int, g *gpu.GPU) { g.Fabric.State = gpu.FabricInProgress }), ptrTo(true), "<nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Build(tc.node, Options{DriverName: testDriver, SysfsRoot: noSysfs, IMEXReady: tc.ready})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range res.Pools[tc.node.Name].Slices {
				for _, d := range s.Devices {
					got := "<nil>"
					if a, ok := d.Attributes[AttrIMEXReady]; ok {
						got = attrString(a)
					}
					want := tc.want
					if d.Name != "gpu-0" && d.Name != "gpu-1" && d.Name != "gpu-2" && d.Name != "gpu-3" && !strings.HasSuffix(d.Name, "-monitor") {
						want = "<nil>" // MIG placements carry no domain attributes
					}
					if got != want {
						t.Errorf("%s imexReady = %s, want %s", d.Name, got, want)
					}
				}
			}
		})
	}
}

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
	"testing"

	"k8s.io/dynamic-resource-allocation/cel"
)

// TestSelectors evaluates the selectors users write against the devices
// Build publishes, with the scheduler's own CEL environment: the types
// (quantity, semver, string) and the domains must line up, or a selector
// fails at scheduling time rather than here.
func TestSelectors(t *testing.T) {
	res, err := Build(mixedNode(), Options{DriverName: testDriver, SysfsRoot: noSysfs})
	if err != nil {
		t.Fatal(err)
	}
	devices := res.Pools["node-a"].Slices[0].Devices // gpu-0 H100, gpu-3 A100 40GB, gpu-7 L4

	tests := []struct {
		expr string
		want map[string]bool // by device name
	}{
		{
			expr: `device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('40Gi')) >= 0`,
			want: map[string]bool{"gpu-0": true, "gpu-3": true, "gpu-7": false},
		},
		{
			expr: `device.attributes['gpu.gpudra.io'].productName.startsWith('NVIDIA H100')`,
			want: map[string]bool{"gpu-0": true, "gpu-3": false, "gpu-7": false},
		},
		{
			expr: `device.attributes['gpu.gpudra.io'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))`,
			want: map[string]bool{"gpu-0": true, "gpu-3": false, "gpu-7": true},
		},
		{
			expr: `device.attributes['gpu.gpudra.io'].type == 'gpu' && device.attributes['gpu.gpudra.io'].migCapable`,
			want: map[string]bool{"gpu-0": true, "gpu-3": true, "gpu-7": false},
		},
		{
			expr: `device.attributes['gpu.gpudra.io'].driverVersion.isGreaterThan(semver('560.28.2')) &&
			       device.attributes['gpu.gpudra.io'].cudaDriverVersion.compareTo(semver('12.4.0')) >= 0`,
			want: map[string]bool{"gpu-0": true, "gpu-3": true, "gpu-7": true},
		},
		{
			// Multiprocessors is omitted on the L4; has() is how a selector
			// guards an optional capacity.
			expr: `has(device.capacity['gpu.gpudra.io'].multiprocessors) &&
			       device.capacity['gpu.gpudra.io'].multiprocessors.compareTo(quantity('100')) >= 0`,
			want: map[string]bool{"gpu-0": true, "gpu-3": true, "gpu-7": false},
		},
		{
			expr: `device.attributes['resource.kubernetes.io'].pciBusID == '0000:3b:00.0'`,
			want: map[string]bool{"gpu-0": false, "gpu-3": true, "gpu-7": false},
		},
		{
			expr: `device.attributes['gpu.gpudra.io'].nvlinkGroup == 1`,
			want: map[string]bool{"gpu-0": false, "gpu-3": true, "gpu-7": false},
		},
	}
	compiler := cel.GetCompiler(cel.Features{})
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			prog := compiler.CompileCELExpression(tt.expr, cel.Options{})
			if prog.Error != nil {
				t.Fatalf("compile: %v", prog.Error)
			}
			for _, d := range devices {
				got, _, err := prog.DeviceMatches(context.Background(), cel.Device{
					Driver:     testDriver,
					Attributes: d.Attributes,
					Capacity:   d.Capacity,
				})
				if err != nil {
					t.Fatalf("%s: %v", d.Name, cel.EnhanceRuntimeError(err))
				}
				if got != tt.want[d.Name] {
					t.Errorf("%s: %v, want %v", d.Name, got, tt.want[d.Name])
				}
			}
		})
	}
}

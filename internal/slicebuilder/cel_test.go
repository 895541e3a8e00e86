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

// TestPartitionSelectors evaluates, with the scheduler's CEL environment,
// selectors written for NVIDIA's MIG devices (mig.nvidia.com), migrated to
// gpudra's domain, on every partition Build publishes: each attribute
// they read is there with the GPU's value. Before partitions carried the
// driver versions, brand and PCI attributes, each of these failed with
// "no such key" on every partition, which fails the scheduler's whole
// attempt.
func TestPartitionSelectors(t *testing.T) {
	node := migNode(h100MIG(), true) // two H100s, driver 550.54.15, CUDA 12.4
	res, err := Build(node, Options{DriverName: testDriver, SysfsRoot: h100Sysfs(t, node), SpareGPUs: SpareGPUs{All: true}})
	if err != nil {
		t.Fatal(err)
	}
	var partitions []string
	devices := map[string]cel.Device{}
	for _, s := range res.Pools["node-a"].Slices {
		for _, d := range s.Devices {
			if a := d.Attributes[AttrType]; a.StringValue != nil && *a.StringValue == TypeMIG {
				partitions = append(partitions, d.Name)
				devices[d.Name] = cel.Device{Driver: testDriver, Attributes: d.Attributes, Capacity: d.Capacity}
			}
		}
	}
	if len(partitions) != 32 {
		t.Fatalf("%d partitions, want 32 (16 per GPU)", len(partitions))
	}
	onGPU1 := func(name string) bool { return strings.HasPrefix(name, "gpu-1-") }
	all := func(string) bool { return true }
	tests := []struct {
		expr string
		want func(device string) bool
	}{
		{
			expr: `device.attributes['gpu.gpudra.io'].type == 'mig' &&
			       device.attributes['gpu.gpudra.io'].architecture == 'Hopper' &&
			       device.attributes['gpu.gpudra.io'].driverVersion.isGreaterThan(semver('550.0.0'))`,
			want: all,
		},
		{
			expr: `device.attributes['gpu.gpudra.io'].driverVersion.compareTo(semver('560.0.0')) >= 0`,
			want: func(string) bool { return false },
		},
		{
			expr: `device.attributes['gpu.gpudra.io'].cudaDriverVersion.compareTo(semver('12.4.0')) >= 0 &&
			       device.attributes['gpu.gpudra.io'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))`,
			want: all,
		},
		{
			expr: `device.attributes['gpu.gpudra.io'].brand == 'Nvidia' &&
			       device.attributes['gpu.gpudra.io'].productName.startsWith('NVIDIA H100')`,
			want: all,
		},
		{
			expr: `device.attributes['resource.kubernetes.io'].pciBusID == '0000:01:00.0'`,
			want: onGPU1,
		},
		{
			expr: `device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:01'`,
			want: onGPU1,
		},
	}
	compiler := cel.GetCompiler(cel.Features{})
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			prog := compiler.CompileCELExpression(tt.expr, cel.Options{})
			if prog.Error != nil {
				t.Fatalf("compile: %v", prog.Error)
			}
			for _, name := range partitions {
				got, _, err := prog.DeviceMatches(context.Background(), devices[name])
				if err != nil {
					t.Fatalf("%s: %v", name, cel.EnhanceRuntimeError(err))
				}
				if got != tt.want(name) {
					t.Errorf("%s: %v, want %v", name, got, tt.want(name))
				}
			}
		})
	}
}

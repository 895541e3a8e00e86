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
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/gpu"
)

// TestBuildDeterministic: the same inventory always gives the same
// slices, whatever order discovery listed the GPUs in. Any difference would
// be an API write on every republish.
func TestBuildDeterministic(t *testing.T) {
	node := mixedNode()
	root := fakeSysfs(t, []fakePCIDevice{
		{busID: "0000:1b:00.0", pcieRoot: "pci0000:16", numaNode: 0},
		{busID: "0000:3b:00.0", pcieRoot: "pci0000:3a", numaNode: 0},
		{busID: "0000:5e:00.0", pcieRoot: "pci0000:5d", numaNode: 1},
	})
	opts := Options{DriverName: testDriver, SysfsRoot: root, Health: map[string]gpu.Health{"GPU-l4-0007": gpu.Unhealthy}}

	first, err := Build(node, opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Build(node, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, second) {
		t.Fatal("Build twice on the same input differs")
	}

	reversed := node
	reversed.GPUs = slices.Clone(node.GPUs)
	slices.Reverse(reversed.GPUs)
	third, err := Build(reversed, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, third) {
		t.Fatal("Build depends on the order of node.GPUs")
	}
	if node.GPUs[0].Minor != 3 {
		t.Fatal("Build reordered the caller's GPUs")
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*gpu.Node, *Options)
		wantErr string
	}{
		{
			name:    "empty driver name",
			mutate:  func(_ *gpu.Node, o *Options) { o.DriverName = "" },
			wantErr: "driver name is empty",
		},
		{
			name:    "driver name not a DNS subdomain",
			mutate:  func(_ *gpu.Node, o *Options) { o.DriverName = "GPU_driver" },
			wantErr: "driver name",
		},
		{
			name:    "empty node name",
			mutate:  func(n *gpu.Node, _ *Options) { n.Name = "" },
			wantErr: "node name",
		},
		{
			name:    "bad driver version",
			mutate:  func(n *gpu.Node, _ *Options) { n.DriverVersion = "R550" },
			wantErr: "driver version",
		},
		{
			name:    "missing CUDA driver version",
			mutate:  func(n *gpu.Node, _ *Options) { n.CUDADriverVersion = "" },
			wantErr: "CUDA driver version",
		},
		{
			name:    "bad compute capability names the GPU",
			mutate:  func(n *gpu.Node, _ *Options) { n.GPUs[1].CUDAComputeCapability = "sm_90" },
			wantErr: "GPU GPU-h100-0000 (minor 0): CUDA compute capability",
		},
		{
			name:    "duplicate minor",
			mutate:  func(n *gpu.Node, _ *Options) { n.GPUs[2].Minor = 3 },
			wantErr: `device "gpu-3" is in slice 0 and slice 0`,
		},
		{
			name:    "product name longer than the API allows",
			mutate:  func(n *gpu.Node, _ *Options) { n.GPUs[0].ProductName = strings.Repeat("x", 65) },
			wantErr: `attribute "productName": value`,
		},
		{
			name:    "driver name too long for the taint key's domain",
			mutate:  func(_ *gpu.Node, o *Options) { o.DriverName = strings.Repeat("a", 64) },
			wantErr: "longer than 63",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := mixedNode()
			opts := Options{DriverName: testDriver, SysfsRoot: noSysfs}
			tt.mutate(&node, &opts)
			_, err := Build(node, opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Build error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

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
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/gpu"
)

func TestHealthTaint(t *testing.T) {
	node := mixedNode()
	tests := []struct {
		name       string
		driverName string
		health     map[string]gpu.Health
		want       map[string][]resourceapi.DeviceTaint // by device name
	}{
		{
			name:       "no health map: no taints",
			driverName: testDriver,
		},
		{
			name:       "healthy and unknown are not tainted",
			driverName: testDriver,
			health:     map[string]gpu.Health{"GPU-h100-0000": gpu.Healthy, "GPU-a100-0003": gpu.Unknown},
		},
		{
			name:       "unhealthy GPU is tainted NoSchedule, the others are not",
			driverName: testDriver,
			health:     map[string]gpu.Health{"GPU-h100-0000": gpu.Healthy, "GPU-a100-0003": gpu.Unhealthy},
			want: map[string][]resourceapi.DeviceTaint{"gpu-3": {{
				Key: "gpu.gpudra.io/unhealthy", Value: "unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule,
			}}},
		},
		{
			name:       "taint domain follows the driver name",
			driverName: "gpu.example.com",
			health:     map[string]gpu.Health{"GPU-l4-0007": gpu.Unhealthy},
			want: map[string][]resourceapi.DeviceTaint{"gpu-7": {{
				Key: "gpu.example.com/unhealthy", Value: "unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule,
			}}},
		},
		{
			name:       "health of an unknown UUID is ignored",
			driverName: testDriver,
			health:     map[string]gpu.Health{"GPU-gone": gpu.Unhealthy},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Build(node, Options{DriverName: tt.driverName, SysfsRoot: noSysfs, Health: tt.health})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range res.Pools[node.Name].Slices[0].Devices {
				want := tt.want[d.Name]
				if len(d.Taints) != len(want) {
					t.Fatalf("%s: taints %+v, want %+v", d.Name, d.Taints, want)
				}
				for i := range want {
					if d.Taints[i] != want[i] {
						t.Errorf("%s: taint %+v, want %+v", d.Name, d.Taints[i], want[i])
					}
				}
			}
		})
	}
}

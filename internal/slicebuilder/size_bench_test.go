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
	"encoding/json"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// fakeInventory is a fake profile's node as the plugin sees it, and the
// root of the fake's sysfs (for the standard topology attributes).
func fakeInventory(tb testing.TB, profile string) (gpu.Node, string) {
	tb.Helper()
	be, err := backend.Open(context.Background(), backend.Options{Kind: "fake", NodeName: "node-0", FakeProfile: profile, FakeStateDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	defer be.Close()
	node, err := be.Discover(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return node, be.SysfsRoot()
}

// poolObjects are the ResourceSlice objects the ResourceSlice controller
// would write for a node's pool (names and metadata as it sets them).
func poolObjects(tb testing.TB, node gpu.Node, opts Options) []*resourceapi.ResourceSlice {
	tb.Helper()
	res, err := Build(node, opts)
	if err != nil {
		tb.Fatal(err)
	}
	pool := res.Pools[node.Name].Slices
	var out []*resourceapi.ResourceSlice
	for i, s := range pool {
		out = append(out, &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%05d", node.Name, opts.DriverName, i)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:         opts.DriverName,
				Pool:           resourceapi.ResourcePool{Name: node.Name, Generation: 1, ResourceSliceCount: int64(len(pool))},
				NodeName:       &node.Name,
				Devices:        s.Devices,
				SharedCounters: s.SharedCounters,
			},
		})
	}
	return out
}

// BenchmarkSliceBytes reports what one node's ResourceSlices weigh on the
// wire and in etcd: protobuf (what the API server stores) and JSON bytes
// per node, and the number of devices, for each built-in fake profile.
//
//	go test ./internal/slicebuilder -run '^$' -bench BenchmarkSliceBytes -benchtime=1x
func BenchmarkSliceBytes(b *testing.B) {
	for _, profile := range nvmlfake.Profiles() {
		node, sysfs := fakeInventory(b, profile)
		b.Run(profile, func(b *testing.B) {
			var protoBytes, jsonBytes, devices int
			for b.Loop() {
				protoBytes, jsonBytes, devices = 0, 0, 0
				for _, s := range poolObjects(b, node, Options{DriverName: testDriver, SysfsRoot: sysfs}) {
					p, err := s.Marshal()
					if err != nil {
						b.Fatal(err)
					}
					j, err := json.Marshal(s)
					if err != nil {
						b.Fatal(err)
					}
					protoBytes += len(p)
					jsonBytes += len(j)
					devices += len(s.Spec.Devices)
				}
			}
			b.ReportMetric(float64(protoBytes), "proto-B/node")
			b.ReportMetric(float64(jsonBytes), "json-B/node")
			b.ReportMetric(float64(devices), "devices/node")
		})
	}
}

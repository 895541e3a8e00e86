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

package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// TestHideBusyReplacesPools: on the 90% fleet of the gpudra layout the
// nodes that keep the spare on the empty fleet are full (their spare taken
// whole) and publish the compact layout, the ones before them get the
// spare and the fixed layout, each under a new pool generation; unhide
// puts the empty fleet's pools back.
func TestHideBusyReplacesPools(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	var names atomic.Int64
	client.PrependReactor("create", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice)
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s%05d", s.GenerateName, names.Add(1))
		}
		return false, nil, nil
	})
	f := existingFleet(client, 2*fleetSpareEvery)
	if _, err := f.publish(ctx, "dgx-h100", layoutGpudra, slicebuilder.DefaultChannels); err != nil {
		t.Fatal(err)
	}
	// pools is each node's number of slices and pool generation.
	pools := func() map[string][2]int64 {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][2]int64{}
		for _, s := range list.Items {
			p := out[*s.Spec.NodeName]
			// (an old generation's slice left behind would show in the
			// count)
			p[0]++
			p[1] = max(p[1], s.Spec.Pool.Generation)
			out[*s.Spec.NodeName] = p
		}
		return out
	}
	check := func(state string, want func(i int) [2]int64) {
		t.Helper()
		got := pools()
		for i, node := range f.nodes {
			if got[node] != want(i) {
				t.Errorf("%s, %s: %d slices in generation %d, want %v", state, node, got[node][0], got[node][1], want(i))
			}
		}
	}
	empty := func(i int) [2]int64 {
		if fleetSpareNode(i, false, false) {
			return [2]int64{11, 1}
		}
		return [2]int64{3, 1}
	}
	check("empty", empty)
	h, err := f.hideBusy(ctx, false, layoutGpudra, "dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	check("90%", func(i int) [2]int64 {
		switch {
		case fleetSpareNode(i, false, false): // full, the spare taken whole
			return [2]int64{3, 2}
		case fleetSpareNode(i, true, false): // the spare moved here
			return [2]int64{11, 2}
		}
		return [2]int64{3, 1}
	})
	if err := f.unhide(ctx, h); err != nil {
		t.Fatal(err)
	}
	check("unhidden", func(i int) [2]int64 {
		if p := empty(i); fleetSpareNode(i, false, false) || fleetSpareNode(i, true, false) {
			return [2]int64{p[0], 3}
		}
		return empty(i)
	})
}

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
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/internal/gpu"
)

// hidesBusy says whether the layout leaves out the placements of GPUs
// held whole, as gpudra's plugin does once the claims that hold them are
// prepared: the benchmark takes them out of the slices when it fills the
// fleet (hideBusy), exactly as the slice builder leaves them out
// (TestHideBusyIsTheBuilders). No kubelet runs, so nothing else changes
// what a node publishes: the spares a partition claim takes are not
// refilled during a cell (the cells take far fewer partitions than the
// spares hold).
func hidesBusy(layout string) bool {
	switch layout {
	case layoutGpudra, layoutAllSpares, layoutFewProfiles, layoutEveryCounterSet:
		return true
	}
	return false
}

// withoutHeldPlacements returns the devices but the MIG placements of the
// GPUs (by minor) that held says are taken whole.
func withoutHeldPlacements(devices []resourceapi.Device, held func(minor int) bool) []resourceapi.Device {
	out := []resourceapi.Device{}
	for _, d := range devices {
		if name, ok := gpu.ParseDeviceName(d.Name); ok && name.MIG && held(name.Minor) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// hidden holds the full device lists of the slices hideBusy changed, by
// slice name.
type hidden map[string][]resourceapi.Device

// hideBusy takes the placements of every GPU the 90% state took whole out
// of the slices, as gpudra's plugin does once it has prepared the claims.
func (f *fleet) hideBusy(ctx context.Context, packed bool) (hidden, error) {
	var items []resourceapi.ResourceSlice
	for opts := (metav1.ListOptions{Limit: 500}); ; {
		list, err := f.client.ResourceV1().ResourceSlices().List(ctx, opts)
		if err != nil {
			return nil, err
		}
		items = append(items, list.Items...)
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	h := hidden{}
	var changed []resourceapi.ResourceSlice
	for _, s := range items {
		if s.Spec.NodeName == nil {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(*s.Spec.NodeName, "fleet-"))
		if err != nil {
			return nil, fmt.Errorf("slice %s of node %s: not a fleet node", s.Name, *s.Spec.NodeName)
		}
		busy := busyGPUs(i, packed)
		keep := withoutHeldPlacements(s.Spec.Devices, func(minor int) bool { return minor < busy })
		if len(keep) == len(s.Spec.Devices) {
			continue
		}
		h[s.Name] = s.Spec.Devices
		s.Spec.Devices = keep
		changed = append(changed, s)
	}
	err := parallel(len(changed), apiWorkers, func(i int) error {
		_, err := f.client.ResourceV1().ResourceSlices().Update(ctx, &changed[i], metav1.UpdateOptions{})
		return err
	})
	return h, err
}

// unhide puts the devices hideBusy took out back.
func (f *fleet) unhide(ctx context.Context, h hidden) error {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	return parallel(len(names), apiWorkers, func(i int) error {
		s, err := f.client.ResourceV1().ResourceSlices().Get(ctx, names[i], metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Devices = h[names[i]]
		_, err = f.client.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
}

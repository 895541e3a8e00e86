package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/pkg/gpu"
)

// layoutHideBusy is gpudra's layout as the plugin would publish it if it
// took the MIG placements of a GPU out of its slices while it holds the
// GPU prepared whole for a claim, and put them back at unprepare: the
// placements cannot be allocated then anyway (the whole GPU consumes all
// their counters), but the scheduler still converts every one and runs the
// class's CEL on it for every claim it tries on the node. The plugin does
// not do this (yet); on the 90% fleet the benchmark publishes the slices
// the plugin would publish once the busy claims are prepared. On an empty
// fleet it is gpudra's layout.
const layoutHideBusy = "gpudra-hide-busy"

// hidden holds the full device lists of the slices hideBusy changed, by
// slice name.
type hidden map[string][]resourceapi.Device

// hideBusy takes the placements of every GPU the 90% state took whole out
// of the slices.
func (f *fleet) hideBusy(ctx context.Context, packed bool) (hidden, error) {
	list, err := f.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	h := hidden{}
	var changed []resourceapi.ResourceSlice
	for _, s := range list.Items {
		if s.Spec.NodeName == nil {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(*s.Spec.NodeName, "fleet-"))
		if err != nil {
			return nil, fmt.Errorf("slice %s of node %s: not a fleet node", s.Name, *s.Spec.NodeName)
		}
		busy := busyGPUs(i, packed)
		var keep []resourceapi.Device
		for _, d := range s.Spec.Devices {
			if name, ok := gpu.ParseDeviceName(d.Name); ok && name.MIG && name.Minor < busy {
				continue
			}
			keep = append(keep, d)
		}
		if len(keep) == len(s.Spec.Devices) {
			continue
		}
		h[s.Name] = s.Spec.Devices
		s.Spec.Devices = keep
		changed = append(changed, s)
	}
	err = parallel(len(changed), apiWorkers, func(i int) error {
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

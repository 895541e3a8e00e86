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

package plugin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// sliceWatch owns the watch of the node's ResourceSlices of the driver:
// what the API server holds, which the publisher's steps and the
// readiness compare with what the plugin publishes.
type sliceWatch struct {
	// cfg is the driver's; only read.
	cfg Config

	// mu guards store and synced, which start sets.
	mu sync.Mutex
	// store is the watch's cache of this node's slices of this driver.
	store  cache.Store
	synced cache.InformerSynced
}

// start watches the node's ResourceSlices of the driver; every
// change wakes the publisher, which hands the controller its next step
// once the API server holds the last one.
func (w *sliceWatch) start(ctx context.Context, wg *sync.WaitGroup, wakeStepper func()) {
	selector := fields.AndSelectors(
		fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, w.cfg.NodeName),
		fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorDriver, w.cfg.DriverName),
	).String()
	factory := informers.NewSharedInformerFactoryWithOptions(w.cfg.KubeClient, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	inf := factory.Resource().V1().ResourceSlices().Informer()
	wake := func(any) { wakeStepper() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    wake,
		UpdateFunc: func(_, obj any) { wake(obj) },
		DeleteFunc: wake,
	}); err != nil {
		klog.FromContext(ctx).Error(err, "Watching the node's ResourceSlices")
	}
	w.mu.Lock()
	w.store, w.synced = inf.GetStore(), inf.HasSynced
	w.mu.Unlock()
	factory.Start(ctx.Done())
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		factory.Shutdown()
	}()
}

// sliceWatchSyncTimeout bounds how long the plugin waits at start-up for
// the slices an earlier run published.
const sliceWatchSyncTimeout = 30 * time.Second

// waitForStoredSlices waits until the slice watch has listed the node's
// slices (or a while has passed), and returns the GPUs whose MIG
// placements they hold, by UUID: an earlier run of the plugin published
// them, the scheduler may have allocated them to claims that have not
// reached the node yet, and they stay published (slicebuilder.Options.
// MigReady). The checkpoint records them too (recordMigPublished), and
// unlike the slices, which the kubelet wipes, it outlives restarts; the
// slices cover what a gpudra older than the record published. Where the
// API server does not answer in time, every
// partitionable GPU counts as published before (more devices than
// needed, never a device taken away under a claim).
func (w *sliceWatch) waitForStoredSlices(ctx context.Context, node gpu.Node) map[string]bool {
	ctx, cancel := context.WithTimeout(ctx, sliceWatchSyncTimeout)
	defer cancel()
	w.mu.Lock()
	store, synced := w.store, w.synced
	w.mu.Unlock()
	byMinor := map[int]string{}
	for _, g := range node.GPUs {
		byMinor[g.Minor] = g.UUID
	}
	out := map[string]bool{}
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		klog.FromContext(ctx).Info("The node's ResourceSlices are not known yet; every partitionable GPU keeps publishing its MIG placements until it is taken whole", "after", sliceWatchSyncTimeout)
		for _, g := range node.GPUs {
			if slicebuilder.Partitionable(g) {
				out[g.UUID] = true
			}
		}
		return out
	}
	for _, obj := range store.List() {
		s, ok := obj.(*resourceapi.ResourceSlice)
		if !ok || s.Spec.Pool.Name != w.cfg.NodeName {
			continue
		}
		for _, dev := range s.Spec.Devices {
			if name, ok := gpu.ParseDeviceName(dev.Name); ok && name.MIG {
				if uuid, ok := byMinor[name.Minor]; ok {
					out[uuid] = true
				}
			}
		}
	}
	return out
}

// storedSlices returns the newest generation of the node's pool as the
// API server holds it, by slice index, and whether it is complete.
func (w *sliceWatch) storedSlices() (map[int]*resourceapi.ResourceSlice, int64, bool, error) {
	w.mu.Lock()
	store, synced := w.store, w.synced
	w.mu.Unlock()
	if store == nil || !synced() {
		return nil, 0, false, errors.New("the ResourceSlices are not known yet")
	}
	var newest int64
	var pool []*resourceapi.ResourceSlice
	for _, obj := range store.List() {
		s, ok := obj.(*resourceapi.ResourceSlice)
		if !ok || s.Spec.Pool.Name != w.cfg.NodeName {
			continue
		}
		switch {
		case s.Spec.Pool.Generation > newest:
			newest, pool = s.Spec.Pool.Generation, []*resourceapi.ResourceSlice{s}
		case s.Spec.Pool.Generation == newest:
			pool = append(pool, s)
		}
	}
	if len(pool) == 0 {
		return nil, 0, false, errNoSlices
	}
	count := pool[0].Spec.Pool.ResourceSliceCount
	byIndex := map[int]*resourceapi.ResourceSlice{}
	for _, s := range pool {
		// The controller names a slice after its index: <hex index>-<driver>-<node>-<suffix>.
		prefix, _, _ := strings.Cut(s.Name, "-")
		i, err := strconv.ParseInt(prefix, 16, 0)
		if err != nil || i < 0 || i >= count || byIndex[int(i)] != nil {
			return nil, 0, false, fmt.Errorf("ResourceSlice %s is not named as the ResourceSlice controller names slices", s.Name)
		}
		byIndex[int(i)] = s
	}
	if int64(len(byIndex)) != count {
		return byIndex, count, false, fmt.Errorf("%d of the pool's %d ResourceSlices are published", len(byIndex), count)
	}
	return byIndex, count, true, nil
}

// errNoSlices: the API server holds no ResourceSlice of the node's pool.
var errNoSlices = errors.New("no ResourceSlice of this node is published yet")

// storedPool is the node's pool as the API server holds it, nil if it
// holds no complete one.
func (w *sliceWatch) storedPool() *resourceslice.Pool {
	byIndex, count, complete, _ := w.storedSlices()
	if !complete {
		return nil
	}
	pool := &resourceslice.Pool{Slices: make([]resourceslice.Slice, count)}
	for i, s := range byIndex {
		pool.Slices[i] = resourceslice.Slice{
			Devices:                s.Spec.Devices,
			SharedCounters:         s.Spec.SharedCounters,
			PerDeviceNodeSelection: s.Spec.PerDeviceNodeSelection,
			PartitionTypeAttribute: s.Spec.PartitionTypeAttribute,
			SkipNodeOperations:     s.Spec.SkipNodeOperations,
		}
	}
	return pool
}

// sameAsStored says how the newest complete generation of the node's pool
// in the API server differs from pool without the fields of the disabled
// features, or nil.
func (w *sliceWatch) sameAsStored(pool resourceslice.Pool, disabled map[string]bool) error {
	byIndex, count, complete, err := w.storedSlices()
	if len(pool.Slices) == 0 && errors.Is(err, errNoSlices) {
		// The plugin publishes nothing (deviceplugin.go), and none is
		// left.
		return nil
	}
	if !complete {
		return err
	}
	if int(count) != len(pool.Slices) {
		return fmt.Errorf("the API server holds %d ResourceSlices of the node, the plugin publishes %d", count, len(pool.Slices))
	}
	changed := 0
	for i, want := range pool.Slices {
		want = slicebuilder.WithoutFeatures(want, disabled)
		s := byIndex[i]
		have := resourceslice.Slice{
			Devices:                s.Spec.Devices,
			SharedCounters:         s.Spec.SharedCounters,
			PerDeviceNodeSelection: s.Spec.PerDeviceNodeSelection,
			PartitionTypeAttribute: s.Spec.PartitionTypeAttribute,
			SkipNodeOperations:     s.Spec.SkipNodeOperations,
		}
		if !slicebuilder.SliceEqual(have, want) {
			changed++
		}
	}
	if changed > 0 {
		return fmt.Errorf("%d of the node's ResourceSlices differ from what the plugin publishes", changed)
	}
	return nil
}

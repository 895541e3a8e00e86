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
	"maps"
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

// The plugin is ready when a scheduler can allocate its GPUs and the
// kubelet can prepare them: the ResourceSlices it wants are what the API
// server holds, and the kubelet has registered the plugin. It watches its
// own node's slices (a field-selected watch, a handful of objects) to know
// the first, and asks the kubeletplugin helper for the second.

// readiness follows the published slices.
type readiness struct {
	mu sync.Mutex
	// slices is the watch of this node's slices of this driver.
	slices cache.Store
	synced cache.InformerSynced
}

// startSliceWatch watches the node's ResourceSlices of the driver; every
// change wakes the publisher, which hands the controller its next step
// once the API server holds the last one.
func (p *publisher) startSliceWatch(ctx context.Context, wg *sync.WaitGroup) {
	selector := fields.AndSelectors(
		fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, p.cfg.NodeName),
		fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorDriver, p.cfg.DriverName),
	).String()
	factory := informers.NewSharedInformerFactoryWithOptions(p.cfg.KubeClient, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	inf := factory.Resource().V1().ResourceSlices().Informer()
	wake := func(any) { p.wakeStepper() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    wake,
		UpdateFunc: func(_, obj any) { wake(obj) },
		DeleteFunc: wake,
	}); err != nil {
		klog.FromContext(ctx).Error(err, "Watching the node's ResourceSlices")
	}
	p.slices.mu.Lock()
	p.slices.slices, p.slices.synced = inf.GetStore(), inf.HasSynced
	p.slices.mu.Unlock()
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
func (p *publisher) waitForStoredSlices(ctx context.Context) map[string]bool {
	ctx, cancel := context.WithTimeout(ctx, sliceWatchSyncTimeout)
	defer cancel()
	p.slices.mu.Lock()
	store, synced := p.slices.slices, p.slices.synced
	p.slices.mu.Unlock()
	node := p.currentNode()
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
		if !ok || s.Spec.Pool.Name != p.cfg.NodeName {
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
func (p *publisher) storedSlices() (map[int]*resourceapi.ResourceSlice, int64, bool, error) {
	p.slices.mu.Lock()
	store, synced := p.slices.slices, p.slices.synced
	p.slices.mu.Unlock()
	if store == nil || !synced() {
		return nil, 0, false, errors.New("the ResourceSlices are not known yet")
	}
	var newest int64
	var pool []*resourceapi.ResourceSlice
	for _, obj := range store.List() {
		s, ok := obj.(*resourceapi.ResourceSlice)
		if !ok || s.Spec.Pool.Name != p.cfg.NodeName {
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
func (p *publisher) storedPool() *resourceslice.Pool {
	byIndex, count, complete, _ := p.storedSlices()
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

// storeHolds says whether the API server holds exactly the pool.
func (p *publisher) storeHolds(pool resourceslice.Pool) bool {
	return p.sameAsStored(pool) == nil
}

// sameAsStored says how the newest complete generation of the node's pool
// in the API server differs from pool, or nil.
func (p *publisher) sameAsStored(pool resourceslice.Pool) error {
	byIndex, count, complete, err := p.storedSlices()
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
	p.mu.Lock()
	disabled := maps.Clone(p.disabledFeatures)
	p.mu.Unlock()
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

// Ready says why the plugin is not ready, or nil: its slices are published
// as built, and the kubelet registered it.
func (d *Driver) Ready() error {
	var errs []error
	if d.helper == nil {
		return errors.New("not serving the kubelet yet")
	}
	if st := d.helper.RegistrationStatus(); st == nil {
		errs = append(errs, errors.New("the kubelet has not registered the plugin yet"))
	} else if !st.PluginRegistered {
		errs = append(errs, fmt.Errorf("the kubelet refused to register the plugin: %s", st.Error))
	}
	if err := d.pub.slicesPublished(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Published says why the API server does not hold the slices the plugin
// publishes now, or nil: no change of the GPUs in use (or of the spares
// assigned) waits to be published, every step towards the slices last
// built was handed over, and the newest complete generation of the node's
// pool holds them. In-process callers (the simulated node) wait for it
// before they schedule.
func (d *Driver) Published() error { return d.pub.published() }

// published is Published.
func (p *publisher) published() error {
	if p.publishPending() {
		return errors.New("a change of the GPUs in use or of the spares assigned is not published yet")
	}
	p.publishMu.Lock()
	wanted := p.steps.wanted
	p.publishMu.Unlock()
	if wanted == nil {
		return errors.New("no ResourceSlices built yet")
	}
	return p.sameAsStored(*wanted)
}

// slicesPublished says whether the API server holds what the controller
// was last given: between the steps of a change that touches several
// slices the plugin stays ready, as the pool stays complete and usable.
func (p *publisher) slicesPublished() error {
	p.publishMu.Lock()
	handed := p.steps.handed
	p.publishMu.Unlock()
	if handed == nil {
		return errors.New("no ResourceSlices built yet")
	}
	return p.sameAsStored(*handed)
}

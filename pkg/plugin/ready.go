package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// The plugin is ready when a scheduler can allocate its GPUs and the
// kubelet can prepare them: the ResourceSlices it wants are what the API
// server holds, and the kubelet has registered the plugin. It watches its
// own node's slices (a field-selected watch, a handful of objects) to know
// the first, and asks the kubeletplugin helper for the second.

// readiness follows the published slices.
type readiness struct {
	mu sync.Mutex
	// want are the device names of the last slices handed to the helper.
	want []string
	// slices is the watch of this node's slices of this driver.
	slices cache.Store
	synced cache.InformerSynced
}

// startSliceWatch watches the node's ResourceSlices of the driver.
func (d *Driver) startSliceWatch(ctx context.Context) {
	selector := fields.AndSelectors(
		fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, d.cfg.NodeName),
		fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorDriver, d.cfg.DriverName),
	).String()
	factory := informers.NewSharedInformerFactoryWithOptions(d.cfg.KubeClient, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	inf := factory.Resource().V1().ResourceSlices().Informer()
	d.ready.mu.Lock()
	d.ready.slices, d.ready.synced = inf.GetStore(), inf.HasSynced
	d.ready.mu.Unlock()
	factory.Start(ctx.Done())
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		<-ctx.Done()
		factory.Shutdown()
	}()
}

// wantPublished records the devices of the slices handed to the helper.
func (d *Driver) wantPublished(resources resourceslice.DriverResources) {
	var names []string
	for _, pool := range resources.Pools {
		for _, s := range pool.Slices {
			for _, dev := range s.Devices {
				names = append(names, dev.Name)
			}
		}
	}
	slices.Sort(names)
	d.ready.mu.Lock()
	d.ready.want = names
	d.ready.mu.Unlock()
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
	if err := d.slicesPublished(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Published says why the API server does not hold the slices the plugin
// publishes now, or nil: no change of the GPUs in use waits to be
// published, and the newest complete generation of the node's pool holds
// exactly the devices last handed to the helper. In-process callers (the
// simulated node) wait for it before they schedule.
func (d *Driver) Published() error {
	if d.publishPending() {
		return errors.New("a change of the GPUs in use is not published yet")
	}
	return d.slicesPublished()
}

// slicesPublished compares the newest generation of the node's pool in the
// API server with the devices last handed to the helper.
func (d *Driver) slicesPublished() error {
	d.ready.mu.Lock()
	want, store, synced := d.ready.want, d.ready.slices, d.ready.synced
	d.ready.mu.Unlock()
	if store == nil || !synced() {
		return errors.New("the ResourceSlices are not known yet")
	}
	if want == nil {
		return errors.New("no ResourceSlices built yet")
	}
	var newest int64
	var pool []*resourceapi.ResourceSlice
	for _, obj := range store.List() {
		s, ok := obj.(*resourceapi.ResourceSlice)
		if !ok || s.Spec.Pool.Name != d.cfg.NodeName {
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
		return errors.New("no ResourceSlice of this node is published yet")
	}
	if int64(len(pool)) != pool[0].Spec.Pool.ResourceSliceCount {
		return fmt.Errorf("%d of the pool's %d ResourceSlices are published", len(pool), pool[0].Spec.Pool.ResourceSliceCount)
	}
	var have []string
	for _, s := range pool {
		for _, dev := range s.Spec.Devices {
			have = append(have, dev.Name)
		}
	}
	slices.Sort(have)
	if !slices.Equal(have, want) {
		return fmt.Errorf("the published ResourceSlices hold %d devices, the plugin publishes %d", len(have), len(want))
	}
	return nil
}

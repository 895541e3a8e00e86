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

package nvlinkpools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// Config is what Run needs.
type Config struct {
	DriverName string
	Client     kubernetes.Interface
	// Channels is how many exclusive channels each pool holds
	// (slicebuilder.ValidateChannels; 0: slicebuilder.DefaultChannels).
	Channels int
	// OwnerClass is the DeviceClass that owns the pools' slices, so that
	// deleting it (uninstalling the chart) deletes them too. Empty, or
	// absent from the cluster when Run starts: the slices have no owner.
	OwnerClass string
	// ResyncPeriod re-delivers every Node and slice to the handlers.
	ResyncPeriod time.Duration
	// SliceSyncDelay is how long the ResourceSlice controller waits after
	// a change of a pool's slices by someone else before it repairs them
	// (0: the library's default, 30 s).
	SliceSyncDelay time.Duration
}

// poolsKey is the work queue's key for "recompute the set of pools";
// every other key is a node name.
const poolsKey = "\x00pools"

// publisher is Run's state. Its fields are set before the worker starts
// and only the worker (one goroutine) uses the mutable ones.
type publisher struct {
	cfg   Config
	label string
	// ready is the IMEX readiness label, set beside label.
	ready  string
	nodes  cache.SharedIndexInformer
	slices cache.SharedIndexInformer
	queue  workqueue.TypedRateLimitingInterface[string]
	// slicer publishes the pools. published are the domains it was last
	// given, sorted (worker only).
	slicer    *resourceslice.Controller
	published []string
}

// nodeIndex indexes node slices by node name.
const nodeIndex = "nodeName"

// Run labels Nodes with their NVLink domain and publishes the domains'
// channel pools until ctx is done. Run it on the leader only: two
// writers would fight over the pools.
func Run(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	if cfg.Channels == 0 {
		cfg.Channels = slicebuilder.DefaultChannels
	}
	if err := slicebuilder.ValidateChannels(cfg.Channels); err != nil {
		return err
	}
	p := &publisher{
		cfg:   cfg,
		label: slicebuilder.NVLinkDomainLabel(cfg.DriverName),
		ready: slicebuilder.IMEXReadyLabel(cfg.DriverName),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nvlink_domains"}),
	}
	defer p.queue.ShutDown()

	// Only this driver's slices; the transform keeps of them what
	// NodeDomain reads, and of Nodes only the domain label.
	p.nodes = informers.NewSharedInformerFactoryWithOptions(cfg.Client, cfg.ResyncPeriod,
		informers.WithTransform(p.trim)).Core().V1().Nodes().Informer()
	p.slices = informers.NewSharedInformerFactoryWithOptions(cfg.Client, cfg.ResyncPeriod,
		informers.WithTransform(p.trim),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorDriver, cfg.DriverName).String()
		})).Resource().V1().ResourceSlices().Informer()
	if err := p.slices.AddIndexers(cache.Indexers{nodeIndex: func(obj any) ([]string, error) {
		if s, ok := obj.(*resourceapi.ResourceSlice); ok && s.Spec.NodeName != nil {
			return []string{*s.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return fmt.Errorf("slice index: %w", err)
	}
	if err := p.watch(); err != nil {
		return err
	}
	go p.nodes.RunWithContext(ctx)
	go p.slices.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), p.nodes.HasSynced, p.slices.HasSynced) {
		return nil // ctx is done
	}

	// The slice controller starts with the pools of the labels that the
	// nodes' slices confirm, so that a new leader deletes none that should
	// stay and a stale label (a node that left its domain while no leader
	// ran) publishes no pool, not even until its label is fixed.
	opts := resourceslice.Options{
		DriverName: cfg.DriverName,
		KubeClient: cfg.Client,
		Owner:      p.owner(ctx),
		ErrorHandler: func(ctx context.Context, err error, msg string) {
			klog.FromContext(ctx).Error(err, "Publishing the NVLink channel pools: "+msg)
		},
	}
	if cfg.SliceSyncDelay > 0 {
		opts.SyncDelay = &cfg.SliceSyncDelay
	}
	p.published = p.confirmedDomains()
	opts.Resources = slicebuilder.ChannelPools(cfg.DriverName, p.published, cfg.Channels)
	slicer, err := resourceslice.StartController(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("NVLink channel pools: %w", err)
	}
	defer slicer.Stop()
	p.slicer = slicer
	logger.Info("Publishing NVLink channel pools", "domains", p.published, "channels", cfg.Channels)

	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	for p.next(ctx) {
	}
	return nil
}

// watch adds the event handlers: a slice change rechecks its node's
// label; a Node whose label changed recomputes the pools; a new Node is
// checked against its slices.
func (p *publisher) watch() error {
	nodeOf := func(obj any) string {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if s, ok := obj.(*resourceapi.ResourceSlice); ok && s.Spec.NodeName != nil {
			return *s.Spec.NodeName
		}
		return ""
	}
	addNode := func(name string) {
		if name != "" {
			p.queue.Add(name)
		}
	}
	if _, err := p.slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { addNode(nodeOf(obj)) },
		UpdateFunc: func(old, obj any) { addNode(nodeOf(old)); addNode(nodeOf(obj)) },
		DeleteFunc: func(obj any) { addNode(nodeOf(obj)) },
	}); err != nil {
		return fmt.Errorf("watch ResourceSlices: %w", err)
	}
	labelOf := func(obj any) (string, string, bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		n, ok := obj.(*v1.Node)
		if !ok {
			return "", "", false
		}
		v, has := n.Labels[p.label]
		return n.Name, v, has
	}
	if _, err := p.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			name, _, has := labelOf(obj)
			addNode(name)
			if has {
				p.queue.Add(poolsKey)
			}
		},
		UpdateFunc: func(old, obj any) {
			_, was, had := labelOf(old)
			name, is, has := labelOf(obj)
			if had != has || was != is {
				p.queue.Add(poolsKey)
			}
			addNode(name)
		},
		DeleteFunc: func(obj any) {
			if _, _, had := labelOf(obj); had {
				p.queue.Add(poolsKey)
			}
		},
	}); err != nil {
		return fmt.Errorf("watch Nodes: %w", err)
	}
	return nil
}

// next handles one key; false when the queue is shut down.
func (p *publisher) next(ctx context.Context) bool {
	key, shutdown := p.queue.Get()
	if shutdown {
		return false
	}
	defer p.queue.Done(key)
	var err error
	if key == poolsKey {
		p.syncPools(ctx)
	} else {
		err = p.syncNode(ctx, key)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Labelling a node with its NVLink domain", "node", key)
		p.queue.AddRateLimited(key)
		return true
	}
	p.queue.Forget(key)
	return true
}

// syncNode sets or removes a Node's domain label and its IMEX readiness
// label to match its slices: the readiness label is "true" on a node in a
// domain whose slices do not say its daemon is not ready, absent
// otherwise.
func (p *publisher) syncNode(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx)
	obj, exists, err := p.nodes.GetStore().GetByKey(name)
	if err != nil || !exists {
		return err // a deleted node keeps no label
	}
	node := obj.(*v1.Node)
	objs, err := p.slices.GetIndexer().ByIndex(nodeIndex, name)
	if err != nil {
		return err
	}
	nodeSlices := make([]*resourceapi.ResourceSlice, 0, len(objs))
	for _, o := range objs {
		nodeSlices = append(nodeSlices, o.(*resourceapi.ResourceSlice))
	}
	domain, err := NodeDomain(p.cfg.DriverName, name, nodeSlices)
	if err != nil {
		// Not retried: the slices must change first, and that
		// requeues the node.
		logger.Error(err, "No NVLink domain label", "node", klog.KObj(node))
	}
	ready := ""
	if domain != "" && NodeIMEXReady(p.cfg.DriverName, name, nodeSlices) {
		ready = "true"
	}
	labels := map[string]any{}
	current := node.Labels[p.label]
	for key, want := range map[string]string{p.label: domain, p.ready: ready} {
		if have, has := node.Labels[key]; has != (want != "") || have != want {
			labels[key] = nil // nil removes the label
			if want != "" {
				labels[key] = want
			}
		}
	}
	if len(labels) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	if _, err := p.cfg.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("node %s: set labels %s=%q, %s=%q: %w", name, p.label, domain, p.ready, ready, err)
	}
	logger.Info("NVLink domain labels", "node", klog.KObj(node), "label", p.label, "domain", domain, "was", current, "imexReady", ready != "")
	return nil
}

// confirmedDomains are the domains of the labels that their nodes' slices
// confirm: the labels syncNode keeps.
func (p *publisher) confirmedDomains() []string {
	var out []string
	for _, obj := range p.nodes.GetStore().List() {
		n, ok := obj.(*v1.Node)
		if !ok {
			continue
		}
		d, has := n.Labels[p.label]
		if !has || d == "" || slices.Contains(out, d) {
			continue
		}
		objs, err := p.slices.GetIndexer().ByIndex(nodeIndex, n.Name)
		if err != nil {
			continue
		}
		nodeSlices := make([]*resourceapi.ResourceSlice, 0, len(objs))
		for _, o := range objs {
			nodeSlices = append(nodeSlices, o.(*resourceapi.ResourceSlice))
		}
		if confirmed, err := NodeDomain(p.cfg.DriverName, n.Name, nodeSlices); err == nil && confirmed == d {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// syncPools hands the slice controller the pools of the labelled domains
// (the labels their nodes' slices confirm) when that set changed.
func (p *publisher) syncPools(ctx context.Context) {
	domains := p.confirmedDomains()
	if slices.Equal(domains, p.published) {
		return
	}
	klog.FromContext(ctx).Info("NVLink domains changed: publishing their channel pools", "domains", domains, "was", p.published)
	p.published = domains
	p.slicer.Update(slicebuilder.ChannelPools(p.cfg.DriverName, domains, p.cfg.Channels))
}

// owner is the DeviceClass the pools' slices are owned by, or nil.
func (p *publisher) owner(ctx context.Context) *resourceslice.Owner {
	if p.cfg.OwnerClass == "" {
		return nil
	}
	logger := klog.FromContext(ctx)
	class, err := p.cfg.Client.ResourceV1().DeviceClasses().Get(ctx, p.cfg.OwnerClass, metav1.GetOptions{})
	if err != nil {
		logger.Info("The NVLink channel pools get no owner: they stay when gpudra is uninstalled, until deleted by hand", "deviceClass", p.cfg.OwnerClass, "err", err)
		return nil
	}
	return &resourceslice.Owner{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass", Name: class.Name, UID: class.UID}
}

// trim keeps of Nodes their name and the two labels, and of slices what
// NodeDomain and NodeIMEXReady read: the caches stay small on a large
// fleet.
func (p *publisher) trim(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Node:
		out := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion}}
		for _, key := range []string{p.label, p.ready} {
			if v, ok := o.Labels[key]; ok {
				if out.Labels == nil {
					out.Labels = map[string]string{}
				}
				out.Labels[key] = v
			}
		}
		return out, nil
	case *resourceapi.ResourceSlice:
		out := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion},
			Spec:       resourceapi.ResourceSliceSpec{Driver: o.Spec.Driver, NodeName: o.Spec.NodeName, Pool: o.Spec.Pool},
		}
		for i := range o.Spec.Devices {
			if d, ok := domainAttribute(p.cfg.DriverName, &o.Spec.Devices[i]); ok {
				attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{slicebuilder.AttrNVLinkDomain: {StringValue: &d}}
				if ready, ok := imexReadyAttribute(p.cfg.DriverName, &o.Spec.Devices[i]); ok {
					attrs[slicebuilder.AttrIMEXReady] = resourceapi.DeviceAttribute{BoolValue: &ready}
				}
				out.Spec.Devices = append(out.Spec.Devices, resourceapi.Device{Name: o.Spec.Devices[i].Name, Attributes: attrs})
			}
		}
		return out, nil
	}
	return obj, nil
}

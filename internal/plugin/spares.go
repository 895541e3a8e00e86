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
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/slicebuilder"
	"github.com/gpudra/gpudra/internal/sparesmap"
)

// Spares across the fleet (--mig-spare-gpus=fleet). gpudra-controller
// keeps a few spare GPUs across the whole fleet rather than one on every
// node, and writes how many each node keeps into one ConfigMap: data[<node
// name>], a decimal number from 1 (its format and its one parser:
// sparesmap.Decode). The plugin watches that one object (a
// list and watch in its namespace selected by metadata.name, which RBAC
// resourceNames can grant, rather than every ConfigMap) and republishes
// when its node's number changes.
//
// A node not listed, a ConfigMap that is not there, a value that is not a
// number from 1 and a watch that has not listed yet all mean 0 spares:
// publishing fewer spares is always safe, as the GPUs published before
// and still free stay published whatever the number (sticky,
// slicebuilder.Options.MigReady). The plugin records each such GPU in
// its checkpoint before it publishes the GPU's placements
// (recordMigPublished), so a restarted plugin keeps publishing them even
// after the kubelet wiped the node's slices and whatever the ConfigMap
// says by then (docs/reliability.md, "Published MIG placements"). So the
// controller can only add spares where they are wanted; taking a node's
// assignment away only stops its refills.

// fleetSpares owns what the spares ConfigMap says about this node, and
// its watch.
type fleetSpares struct {
	// cfg is the driver's; republish asks the publisher for a publish.
	// Both are set before the watch starts; only read after.
	cfg       Config
	republish func()

	// mu guards assigned, seen, listed and raw.
	mu sync.Mutex
	// assigned is the number of spares the controller assigned the node.
	assigned int
	// seen says whether the ConfigMap was read at all; listed whether it
	// had the node's key, raw its value: an event that leaves them as
	// they were (another node's entry changed) is not logged again.
	seen, listed bool
	raw          string
}

// assignedSpares is the number of spares gpudra-controller assigned the
// node, 0 until the ConfigMap was read.
func (f *fleetSpares) assignedSpares() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.assigned
}

// spareGPUs is the spare setting to publish with: the flag's, or in fleet
// mode the number gpudra-controller assigned the node.
func (p *publisher) spareGPUs() slicebuilder.SpareGPUs {
	if !p.cfg.SpareGPUs.Fleet {
		return p.cfg.SpareGPUs
	}
	return slicebuilder.FleetAssigned(p.fleet.assignedSpares())
}

// checkFleetConfig says what fleet mode lacks, or nil (and nil outside
// fleet mode).
func (cfg Config) checkFleetConfig() error {
	if !cfg.SpareGPUs.Fleet {
		return nil
	}
	switch {
	case cfg.Namespace == "":
		return fmt.Errorf("spare GPUs in fleet mode are read from the ConfigMap %q in the plugin's namespace, and no namespace is set (--namespace, env POD_NAMESPACE from the downward API)", cfg.SparesConfigMap)
	case cfg.SparesConfigMap == "":
		return fmt.Errorf("spare GPUs in fleet mode are read from a ConfigMap in namespace %s, and none is named (--mig-spares-configmap)", cfg.Namespace)
	}
	return nil
}

// watch watches the spares ConfigMap in fleet mode; every
// change of the node's number of spares republishes.
func (f *fleetSpares) watch(ctx context.Context, wg *sync.WaitGroup) {
	if !f.cfg.SpareGPUs.Fleet {
		return
	}
	logger := klog.FromContext(ctx)
	name := f.cfg.SparesConfigMap
	factory := informers.NewSharedInformerFactoryWithOptions(f.cfg.KubeClient, 0,
		informers.WithNamespace(f.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, name).String()
		}))
	inf := factory.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.changed(ctx, obj, false) },
		UpdateFunc: func(_, obj any) { f.changed(ctx, obj, false) },
		DeleteFunc: func(obj any) { f.changed(ctx, obj, true) },
	}); err != nil {
		// Without the handler the node keeps 0 spares assigned: the
		// spares it published before stay, none are added.
		logger.Error(err, "Watching the spares ConfigMap", "configMap", klog.KRef(f.cfg.Namespace, name))
	}
	factory.Start(ctx.Done())
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		factory.Shutdown()
	}()
}

// changed reads the node's number of spares from an event of the
// spares ConfigMap (deleted: none) and republishes if it changed.
func (f *fleetSpares) changed(ctx context.Context, obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	cm, ok := obj.(*v1.ConfigMap)
	// The API server sends only the selected object; a client that
	// ignores field selectors (a fake one) sends every ConfigMap.
	if !ok || cm.Name != f.cfg.SparesConfigMap {
		return
	}
	raw, listed := "", false
	if !deleted {
		raw, listed = cm.Data[f.cfg.NodeName]
	}
	f.mu.Lock()
	if f.seen && f.listed == listed && f.raw == raw {
		f.mu.Unlock()
		return
	}
	n, err := 0, error(nil)
	if listed {
		n, err = sparesmap.Decode(raw)
	}
	before := f.assigned
	f.seen, f.listed, f.raw, f.assigned = true, listed, raw, n
	if n != before {
		// Asked before the new number can be seen, so that Published
		// waits for the publish that uses it. (The GPUs published before
		// stay published: a lower number only stops refills.)
		f.republish()
	}
	f.mu.Unlock()

	logger := klog.FromContext(ctx).WithValues("configMap", klog.KRef(f.cfg.Namespace, f.cfg.SparesConfigMap))
	if err != nil {
		logger.Error(err, "The spares ConfigMap's entry for this node is not a number of spare GPUs; the node counts as assigned none", "key", f.cfg.NodeName, "value", sparesmap.ShortValue(raw))
	}
	if n != before {
		logger.Info("The spare GPUs gpudra-controller assigned this node changed", "spares", n, "before", before)
	}
}

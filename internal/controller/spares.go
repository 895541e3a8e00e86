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

package controller

import (
	"context"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/fleet"
	"github.com/gpudra/gpudra/internal/migspares"
	"github.com/gpudra/gpudra/internal/sparesmap"
)

// DefaultMigSparesConfigMap is the ConfigMap the controller writes the
// fleet's spare assignment into and the plugins in fleet mode read
// (--mig-spares-configmap on both; the chart creates it, empty).
const DefaultMigSparesConfigMap = "gpudra-mig-spares"

// The reasons of gpudra_mig_spares_write_errors_total.
const (
	spareErrMissing  = "missing"
	spareErrConflict = "conflict"
	spareErrOther    = "error"
)

// spareKeeper keeps the fleet's budget of spare nodes (package
// migspares) in the ConfigMap, on the leader, after each fleet recompute.
// It only gets and updates the ConfigMap (the chart creates it and grants
// nothing more), and writes only when the assignment changes: the
// recompute interval already folds a burst of slice changes into one
// recompute, so into one write.
type spareKeeper struct {
	client          kubernetes.Interface
	namespace, name string
	target          migspares.Target
	// demand follows each node pool's partition demand (nil: the
	// budget's share only, --mig-spare-follow-demand=false).
	demand *migspares.Demand
	m      *metrics
	// data is what the ConfigMap holds, as last read or written; nil
	// until it is read (a new leader keeps what the last one wrote) and
	// after a failed write (another writer, or none of ours landed: read
	// it again). current are its entries the controller writes
	// (sparesmap.Parse): a foreign value is neither kept nor counted.
	data    map[string]string
	current migspares.Assignment
	// given are the nodes given a spare for waiting pods, by pod
	// (migspares.Result.Given): a pod gets one, not one per recompute.
	given map[string]string
	// pools are the node pools whose metrics are exported.
	pools map[string]bool
}

// update decides the assignment from the fleet's view and writes it when
// it changed. It says whether the ConfigMap is as decided; false asks for
// another try at the next recompute.
func (k *spareKeeper) update(ctx context.Context, now time.Time, view map[string]fleet.MIGNode, unplaced []fleet.Unplaced) bool {
	logger := klog.FromContext(ctx)
	var cm *corev1.ConfigMap
	if k.data == nil {
		var err error
		if cm, err = k.get(ctx); err != nil {
			return false
		}
		k.read(logger, cm)
	}
	nodes := spareView(view)
	waiting := make([]migspares.Waiting, 0, len(unplaced))
	for _, u := range unplaced {
		waiting = append(waiting, migspares.Waiting{Pod: u.Pod, Nodes: u.Nodes, Gang: u.Gang})
	}
	if k.demand != nil {
		k.demand.Observe(now, nodes, waiting)
	}
	targets := k.target.PoolTargets(nodes, k.demand, now)
	res := migspares.AssignPools(nodes, k.current, targets, waiting, k.given)
	// Kept whether or not the write below lands: a failed write is
	// decided again at the next recompute, for the same pods.
	k.given = res.Given
	k.m.spareNodes.WithLabelValues("target").Set(float64(res.Target))
	k.m.spareNodes.WithLabelValues("with_spare").Set(float64(res.WithSpare))
	k.setPoolMetrics(now, res)
	data := sparesmap.EncodeAll(res.Assignment)
	if maps.Equal(data, k.data) {
		k.m.spareNodes.WithLabelValues("assigned").Set(float64(len(k.current)))
		return true
	}
	if cm == nil {
		var err error
		if cm, err = k.get(ctx); err != nil {
			return false
		}
	}
	cm = cm.DeepCopy()
	// Only what it assigns: a foreign entry is left out.
	cm.Data = data
	if _, err := k.client.CoreV1().ConfigMaps(k.namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		reason := spareErrOther
		switch {
		case apierrors.IsConflict(err):
			reason = spareErrConflict
		case apierrors.IsNotFound(err):
			reason = spareErrMissing
		}
		k.m.spareWriteErrors.WithLabelValues(reason).Inc()
		logger.Error(err, "Writing the fleet's spare nodes; retrying at the next recompute", "configMap", klog.KRef(k.namespace, k.name))
		k.data, k.current = nil, nil
		return false
	}
	added, dropped := diff(k.current, res.Assignment)
	logger.Info("Spare nodes assigned", "configMap", klog.KRef(k.namespace, k.name), "target", res.Target, "withSpare", res.WithSpare,
		"assigned", len(res.Assignment), "added", added, "dropped", dropped, "pools", targets)
	k.data, k.current = data, res.Assignment
	k.m.spareNodes.WithLabelValues("assigned").Set(float64(len(k.current)))
	return true
}

// setPoolMetrics exports each node pool's target and, when spares follow
// demand, its partition share; a pool that is gone is deleted, so that
// its series do not linger.
func (k *spareKeeper) setPoolMetrics(now time.Time, res migspares.Result) {
	for pool := range k.pools {
		if _, ok := res.Pools[pool]; !ok {
			k.m.sparePoolTarget.DeleteLabelValues(pool)
			k.m.sparePoolShare.DeleteLabelValues(pool)
		}
	}
	k.pools = map[string]bool{}
	for pool, r := range res.Pools {
		k.pools[pool] = true
		k.m.sparePoolTarget.WithLabelValues(pool).Set(float64(r.Target))
		if k.demand != nil {
			k.m.sparePoolShare.WithLabelValues(pool).Set(k.demand.Share(pool, now))
		}
	}
}

// get reads the ConfigMap, counting and logging a failure.
func (k *spareKeeper) get(ctx context.Context) (*corev1.ConfigMap, error) {
	cm, err := k.client.CoreV1().ConfigMaps(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	if err == nil {
		return cm, nil
	}
	logger := klog.FromContext(ctx)
	if apierrors.IsNotFound(err) {
		k.m.spareWriteErrors.WithLabelValues(spareErrMissing).Inc()
		// The controller may not create it: its rights name this one
		// ConfigMap (resourceNames), which a create cannot be limited to.
		logger.Error(err, "The ConfigMap of the fleet's spare nodes is missing, so no node is assigned a spare; the chart creates it: "+
			"upgrade the chart, or create it empty (kubectl create configmap), or set --mig-spare-nodes=0",
			"configMap", klog.KRef(k.namespace, k.name))
		return nil, err
	}
	k.m.spareWriteErrors.WithLabelValues(spareErrOther).Inc()
	logger.Error(err, "Reading the ConfigMap of the fleet's spare nodes; retrying at the next recompute", "configMap", klog.KRef(k.namespace, k.name))
	return nil, err
}

// read takes the ConfigMap's data (sparesmap.Parse): the entries the
// controller wrote are the current assignment; a foreign value (one it
// never writes, e.g. a hand edit of 2147483647) is logged, cut short, and
// left out of the next write, which the difference makes.
func (k *spareKeeper) read(logger klog.Logger, cm *corev1.ConfigMap) {
	k.data = maps.Clone(cm.Data)
	if k.data == nil {
		k.data = map[string]string{}
	}
	var foreign map[string]string
	k.current, foreign = sparesmap.Parse(cm.Data)
	for _, node := range slices.Sorted(maps.Keys(foreign)) {
		logger.Info("Ignoring a spare assignment gpudra-controller does not write; it is dropped at the next write",
			"configMap", klog.KObj(cm), "node", sparesmap.ShortValue(node), "value", sparesmap.ShortValue(foreign[node]), "want", sparesmap.Encode(sparesmap.Own))
	}
}

// spareView is the fleet's MIG view as the policy reads it, by node name.
func spareView(view map[string]fleet.MIGNode) []migspares.Node {
	out := make([]migspares.Node, 0, len(view))
	for _, name := range slices.Sorted(maps.Keys(view)) {
		v := view[name]
		n := migspares.Node{Name: name, Pool: v.Pool, Ready: v.Schedulable, GPUs: make([]migspares.GPU, 0, len(v.GPUs))}
		for _, g := range v.GPUs {
			n.GPUs = append(n.GPUs, migspares.GPU{Whole: g.Whole, Partitioned: g.Partitioned, Unhealthy: g.Tainted, Published: g.Published, Partitions: g.Partitions})
		}
		out = append(out, n)
	}
	return out
}

// diff names the nodes b assigns and a does not, and the reverse.
func diff(a, b migspares.Assignment) (added, dropped []string) {
	for n := range b {
		if _, ok := a[n]; !ok {
			added = append(added, n)
		}
	}
	for n := range a {
		if _, ok := b[n]; !ok {
			dropped = append(dropped, n)
		}
	}
	slices.Sort(added)
	slices.Sort(dropped)
	return added, dropped
}

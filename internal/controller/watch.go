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
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/fleet"
	"github.com/gpudra/gpudra/internal/migspares"
	"github.com/gpudra/gpudra/internal/scheduler"
)

// watchFleet runs the informers and recomputes the fleet accounting after
// changes, rate-limited, until ctx is done.
func watchFleet(ctx context.Context, cfg Config, m *metrics) error {
	logger := klog.FromContext(ctx)
	inf := newFleetInformers(ctx, cfg.Client, cfg.ResyncPeriod)
	features := clusterFeatures(ctx, cfg)
	strander := &fleet.Strander{}
	trigger := fleet.NewTrigger(cfg.RecomputeInterval)
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { trigger.Notify() },
		UpdateFunc: func(any, any) { trigger.Notify() },
		DeleteFunc: func(any) { trigger.Notify() },
	}
	if err := inf.start(ctx, notify); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer inf.factory.Shutdown()
	logger.Info("Informers synced")

	var spares *spareKeeper
	if !cfg.MigSpareNodes.Off() {
		spares = &spareKeeper{client: cfg.Client, namespace: cfg.Namespace, name: cfg.MigSparesConfigMap, target: cfg.MigSpareNodes, m: m}
		if cfg.MigSpareFollowDemand {
			spares.demand = &migspares.Demand{}
		}
		logger.Info("Keeping the fleet's spare nodes", "target", cfg.MigSpareNodes.String(), "followDemand", cfg.MigSpareFollowDemand,
			"poolLabels", cfg.MigSparePoolLabels, "configMap", klog.KRef(cfg.Namespace, cfg.MigSparesConfigMap))
	}

	trigger.Run(ctx, func(ctx context.Context) {
		start := time.Now()
		in, err := inf.inputs(cfg.DriverName, start, features)
		in.PoolLabels = cfg.MigSparePoolLabels
		if err != nil {
			logger.Error(err, "Listing from the informers' caches")
			return
		}
		snap, err := strander.Recompute(ctx, in)
		if err != nil {
			// The accounting is whole; only the stranded GPUs are not.
			logger.Error(err, "Computing stranded GPUs")
			m.strandErrors.Inc()
		}
		m.fleet.set(&snap)
		// The spares read the same snapshot (no informer of their own);
		// a failed write is tried again one recompute interval later,
		// even if nothing changes meanwhile (the ConfigMap is not
		// watched).
		if spares != nil && !spares.update(ctx, start, snap.MIG, snap.Stranding.Unplaced) {
			trigger.Notify()
		}
		took := time.Since(start)
		m.recomputes.Inc()
		m.recomputeDuration.Observe(took.Seconds())
		m.lastRecompute.Set(float64(start.Unix()))
		logger.V(4).Info("Fleet recomputed", "took", took, "pending", len(snap.Pending),
			"pendingPods", snap.Stranding.PendingPods, "shapes", snap.Stranding.Shapes, "filters", snap.Stranding.Filters)
	})
	return nil
}

// ContentType is the wire format the controller's client should ask the
// API server for: everything it reads is a built-in type, which protobuf
// encodes and decodes with less time and garbage than JSON.
const ContentType = "application/vnd.kubernetes.protobuf"

// fleetInformers are the leader's informers: what the fleet accounting
// reads, trimmed (transform.trim) as it enters the caches.
type fleetInformers struct {
	factory                              informers.SharedInformerFactory
	slices, claims, classes, pods, nodes cache.SharedIndexInformer
	// taintRules (DeviceTaintRules taint devices for the scheduler) and
	// podGroups (PodGroups make pods gangs) are nil where the cluster does
	// not serve them.
	taintRules, podGroups cache.SharedIndexInformer
}

func newFleetInformers(ctx context.Context, client kubernetes.Interface, resync time.Duration) *fleetInformers {
	t := &transform{compactor: &fleet.Compactor{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(t.trim))
	resource := factory.Resource().V1()
	f := &fleetInformers{
		factory: factory,
		slices:  resource.ResourceSlices().Informer(),
		claims:  resource.ResourceClaims().Informer(),
		classes: resource.DeviceClasses().Informer(),
		pods:    factory.Core().V1().Pods().Informer(),
		nodes:   factory.Core().V1().Nodes().Informer(),
	}
	if served(ctx, client, "resource.k8s.io/v1", "devicetaintrules") {
		f.taintRules = resource.DeviceTaintRules().Informer()
	}
	if served(ctx, client, "scheduling.k8s.io/v1beta1", "podgroups") {
		f.podGroups = factory.Scheduling().V1beta1().PodGroups().Informer()
	}
	return f
}

// start adds the handler to every informer, starts them and waits until
// their caches are synced (or ctx is done).
func (f *fleetInformers) start(ctx context.Context, handler cache.ResourceEventHandler) error {
	for _, inf := range []cache.SharedIndexInformer{f.slices, f.claims, f.classes, f.pods, f.nodes, f.taintRules, f.podGroups} {
		if inf == nil {
			continue
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
	}
	f.factory.Start(ctx.Done())
	for typ, ok := range f.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer for %v did not sync", typ)
		}
	}
	return nil
}

// inputs lists what the caches hold, for one recompute.
func (f *fleetInformers) inputs(driver string, now time.Time, features scheduler.Features) (fleet.Inputs, error) {
	in := fleet.Inputs{DriverName: driver, Now: now, Features: features}
	var err error
	if in.Compact, err = listAs[*fleet.CompactSlice](f.slices); err != nil {
		return in, err
	}
	if in.Claims, err = listAs[*resourceapi.ResourceClaim](f.claims); err != nil {
		return in, err
	}
	if in.Classes, err = listAs[*resourceapi.DeviceClass](f.classes); err != nil {
		return in, err
	}
	if in.Pods, err = listAs[*corev1.Pod](f.pods); err != nil {
		return in, err
	}
	if in.Nodes, err = listAs[*corev1.Node](f.nodes); err != nil {
		return in, err
	}
	if f.taintRules != nil {
		if in.TaintRules, err = listAs[*resourceapi.DeviceTaintRule](f.taintRules); err != nil {
			return in, err
		}
	}
	if f.podGroups != nil {
		in.PodGroups, err = listAs[*schedulingv1beta1.PodGroup](f.podGroups)
	}
	return in, err
}

// clusterFeatures is the DRA feature set of the cluster's Kubernetes
// version, for the stranded-GPU accounting; the default one when the
// version is unknown or not one the scheduler core knows.
func clusterFeatures(ctx context.Context, cfg Config) scheduler.Features {
	logger := klog.FromContext(ctx)
	v, err := cfg.Client.Discovery().ServerVersion()
	if err != nil {
		logger.Error(err, "Reading the Kubernetes version; assuming the default feature set")
		return scheduler.DefaultFeatures()
	}
	version := v.Major + "." + strings.TrimRight(v.Minor, "+")
	f, err := scheduler.FeaturesFor(version)
	if err != nil {
		logger.Info("The scheduler core does not know this Kubernetes version; assuming the default feature set", "version", version, "err", err)
		return scheduler.DefaultFeatures()
	}
	return f
}

// served says whether the cluster serves a resource of an API group
// version; a cluster that does not (an older version, a beta API not
// enabled) is accounted for without it.
func served(ctx context.Context, client kubernetes.Interface, groupVersion, resource string) bool {
	list, err := client.Discovery().ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("API not served; the fleet accounting goes without it", "groupVersion", groupVersion, "resource", resource, "err", err)
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return true
		}
	}
	return false
}

// listAs lists an informer's cache as objects of type T.
func listAs[T any](inf cache.SharedIndexInformer) ([]T, error) {
	items := inf.GetStore().List()
	out := make([]T, 0, len(items))
	for _, o := range items {
		t, ok := o.(T)
		if !ok {
			return nil, fmt.Errorf("the informer's cache holds a %T, want a %T", o, *new(T))
		}
		out = append(out, t)
	}
	return out, nil
}

// transform is what the informers' caches keep of each object.
type transform struct {
	compactor *fleet.Compactor
}

// trim keeps of each object only what the accounting reads, so that the
// controller's memory grows with the cluster by little: ResourceSlices
// compacted (fleet.Compactor: slices alike share their content), Pods,
// Nodes and ResourceClaims reduced to the fields the accounting reads,
// DeviceClasses without their managed fields.
func (t *transform) trim(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return trimPod(o), nil
	case *corev1.Node:
		return &corev1.Node{
			ObjectMeta: trimMeta(o.ObjectMeta, true),
			Spec:       corev1.NodeSpec{Unschedulable: o.Spec.Unschedulable, Taints: o.Spec.Taints},
			Status:     corev1.NodeStatus{Conditions: readyCondition(o.Status.Conditions)},
		}, nil
	case *resourceapi.ResourceSlice:
		return t.compactor.Compact(o), nil
	case *resourceapi.ResourceClaim:
		// The spec says what a pending claim asks for; the allocation
		// what an allocated one holds. The devices' status (conditions,
		// network data) and the consumers are not read.
		return &resourceapi.ResourceClaim{
			ObjectMeta: trimMeta(o.ObjectMeta, false),
			Spec:       o.Spec,
			Status:     resourceapi.ResourceClaimStatus{Allocation: o.Status.Allocation},
		}, nil
	case *resourceapi.DeviceClass:
		o.ManagedFields = nil
	case *resourceapi.DeviceTaintRule:
		o.ManagedFields = nil
	case *schedulingv1beta1.PodGroup:
		return &schedulingv1beta1.PodGroup{
			ObjectMeta: trimMeta(o.ObjectMeta, false),
			Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: o.Spec.SchedulingPolicy},
			Status:     schedulingv1beta1.PodGroupStatus{ResourceClaimStatuses: o.Status.ResourceClaimStatuses},
		}, nil
	}
	return obj, nil
}

func trimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		ObjectMeta: trimMeta(p.ObjectMeta, false),
		Spec: corev1.PodSpec{
			NodeName:       p.Spec.NodeName,
			ResourceClaims: p.Spec.ResourceClaims,
			// Where the pod may go (scheduler.PodFitsNode), and its gang.
			NodeSelector:    p.Spec.NodeSelector,
			Tolerations:     p.Spec.Tolerations,
			SchedulingGroup: p.Spec.SchedulingGroup,
		},
		Status: corev1.PodStatus{
			Phase:                       p.Status.Phase,
			ResourceClaimStatuses:       p.Status.ResourceClaimStatuses,
			ExtendedResourceClaimStatus: p.Status.ExtendedResourceClaimStatus,
		},
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		out.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution}}
	}
	// Extended resources (nvidia.com/gpu: 1 mapped to a DeviceClass) are
	// requested in the containers' resources.
	for _, c := range p.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy})
	}
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Resources: c.Resources})
	}
	return out
}

func trimMeta(m metav1.ObjectMeta, keepLabels bool) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
	}
	if keepLabels {
		out.Labels = m.Labels
	}
	return out
}

func readyCondition(conds []corev1.NodeCondition) []corev1.NodeCondition {
	for _, c := range conds {
		if c.Type == corev1.NodeReady {
			return []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return nil
}

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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/simulate"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// fleet is the N fake GPU nodes of one run, as the API server sees them.
type fleet struct {
	client    kubernetes.Interface
	namespace string
	nodes     []string
	// profile is the nodes' fake profile; a GB200 fleet's (isGB200) nodes
	// are labelled with their NVLink domain.
	profile string
}

// parallel runs fn(i) for i in [0, n) on workers goroutines and returns
// the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(n, workers) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// apiWorkers is how many requests the benchmark keeps in flight.
const apiWorkers = 16

// setUp creates the namespace, the DeviceClasses gpudra ships and n Ready
// nodes of the profile, as scheduler_perf does: no kubelet, nothing ever
// runs.
func setUp(ctx context.Context, client kubernetes.Interface, n int, profile string) (*fleet, error) {
	f := &fleet{client: client, namespace: "fleet", profile: profile}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.namespace}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	// No controller manager runs, so nobody else creates it; pod
	// admission wants it.
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: "default"}}
	if _, err := client.CoreV1().ServiceAccounts(f.namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create service account: %w", err)
	}
	classes, err := simulate.LoadDeviceClasses(deviceclasses.FS)
	if err != nil {
		return nil, err
	}
	for _, c := range classes {
		if _, err := client.ResourceV1().DeviceClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create DeviceClass %s: %w", c.Name, err)
		}
	}
	f.nodes = existingFleet(client, n).nodes
	err = parallel(n, apiWorkers, func(i int) error { return f.createNode(ctx, i) })
	return f, err
}

// existingFleet is the fleet setUp made earlier (in another process).
func existingFleet(client kubernetes.Interface, n int) *fleet {
	f := &fleet{client: client, namespace: "fleet"}
	for i := range n {
		f.nodes = append(f.nodes, nodeName(i))
	}
	return f
}

func (f *fleet) createNode(ctx context.Context, i int) error {
	name := f.nodes[i]
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nodeLabels(name, i, f.profile)}}
	node, err := f.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("224"),
		v1.ResourceMemory: resource.MustParse("2Ti"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	node.Status = v1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		Phase: v1.NodeRunning,
	}
	if node, err = f.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s status: %w", name, err)
	}
	// Admission (TaintNodesByCondition) gives a new node the not-ready
	// taint; the controller manager's node lifecycle controller would
	// take it off once the node reports Ready, and none runs here.
	node.Spec.Taints = nil
	if _, err := f.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s: remove the not-ready taint: %w", name, err)
	}
	return nil
}

// nodeLabels are node i's labels: a GPU node's, and on a GB200 fleet the
// NVLink domain label gpudra-controller puts on a tray whose GPUs carry
// the domain (internal/nvlinkpools).
func nodeLabels(name string, i int, profile string) map[string]string {
	labels := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "nvidia.com/gpu.present": "true"}
	if isGB200(profile) {
		// What gpudra-controller labels a tray with whose IMEX daemon is
		// ready: the channel pools select on both.
		labels[slicebuilder.NVLinkDomainLabel(driverName)] = domainOf(i)
		labels[slicebuilder.IMEXReadyLabel(driverName)] = "true"
	}
	return labels
}

// publishStats is what publishing a layout cost.
type publishStats struct {
	Slices  int `json:"slices"`
	Devices int `json:"devices"`
	// Bytes of JSON, ProtoBytes of protobuf (what the API server stores
	// and sends its watchers).
	Bytes      int     `json:"bytes"`
	ProtoBytes int     `json:"protoBytes"`
	Seconds    float64 `json:"seconds"`
	// ChannelPools and ChannelSlices: the NVLink domains' channel pools
	// of a GB200 fleet (included in Slices and Devices), Channels the
	// exclusive channels of each.
	ChannelPools  int `json:"channelPools,omitempty"`
	ChannelSlices int `json:"channelSlices,omitempty"`
	Channels      int `json:"channels,omitempty"`
}

// publish creates every node's ResourceSlices in the layout, built from a
// fake node of the profile discovered as the plugin discovers it, and on a
// GB200 fleet every domain's channel pool with the given channels.
func (f *fleet) publish(ctx context.Context, profile, layout string, channels int) (publishStats, error) {
	// The fake GPUs' throw-away state: in memory where there is a tmpfs
	// (discovery writes it; the disk would be the slow part).
	scratch := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		scratch = "/dev/shm"
	}
	dir, err := os.MkdirTemp(scratch, "gpudra-fleetbench-")
	if err != nil {
		return publishStats{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	var stats publishStats
	var mu sync.Mutex
	create := func(s *resourceapi.ResourceSlice) error {
		data, _ := json.Marshal(s)
		proto, _ := s.Marshal()
		if _, err := f.client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ResourceSlice %s%s of pool %s: %w", s.Name, s.GenerateName, s.Spec.Pool.Name, err)
		}
		mu.Lock()
		defer mu.Unlock()
		stats.Slices++
		stats.Devices += len(s.Spec.Devices)
		stats.Bytes += len(data)
		stats.ProtoBytes += len(proto)
		return nil
	}
	start := time.Now()
	err = parallel(len(f.nodes), apiWorkers, func(i int) error {
		name := f.nodes[i]
		nodeProfile := profile
		if isGB200(profile) {
			var err error
			if nodeProfile, err = trayProfile(dir, i); err != nil {
				return err
			}
		}
		var objs []*resourceapi.ResourceSlice
		err := fakenodes.WithNode(ctx, nodeProfile, name, dir, func(node gpu.Node, sysfsRoot string) error {
			pool, err := nodeSlices(node, sysfsRoot, driverName, layout, fleetSpareNode(i, false, false))
			objs = sliceObjects(driverName, name, pool)
			return err
		})
		if err != nil {
			return err
		}
		for _, s := range objs {
			if err := create(s); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && isGB200(profile) {
		domains := fleetDomains(len(f.nodes))
		pools := channelPoolObjects(domains, channels)
		stats.ChannelPools, stats.ChannelSlices, stats.Channels = len(domains), len(pools), channels
		err = parallel(len(pools), apiWorkers, func(i int) error { return create(pools[i]) })
	}
	stats.Seconds = time.Since(start).Seconds()
	return stats, err
}

// fill allocates 90% of the fleet's GPUs with one busy claim per node
// (busyGPUs), or frees them all again (packed is then ignored).
func (f *fleet) fill(ctx context.Context, packed bool) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	err := parallel(len(f.nodes), apiWorkers, func(i int) error {
		count := busyGPUs(i, packed)
		if count == 0 {
			return nil
		}
		claim := busyClaim(f.namespace, f.nodes[i], count)
		status := claim.Status
		created, err := f.client.ResourceV1().ResourceClaims(f.namespace).Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create busy claim: %w", err)
		}
		created.Status = status
		if _, err := f.client.ResourceV1().ResourceClaims(f.namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("allocate busy claim %s: %w", created.Name, err)
		}
		return nil
	})
	logger.Info("Filled the fleet", "packed", packed, "seconds", time.Since(start).Seconds())
	return err
}

// empty deletes the busy claims.
func (f *fleet) empty(ctx context.Context) error {
	return parallel(len(f.nodes), apiWorkers, func(i int) error {
		err := f.client.ResourceV1().ResourceClaims(f.namespace).Delete(ctx, "busy-"+f.nodes[i], metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// release deletes a workload's pods and claims. Without a controller
// manager nobody deallocates the claims and takes off the scheduler's
// finalizer, so this does it, as the resourceclaim controller would once
// the pods are gone.
func (f *fleet) release(ctx context.Context, names []string) error {
	zero := int64(0)
	return parallel(len(names), apiWorkers, func(i int) error {
		name := names[i]
		err := f.client.CoreV1().Pods(f.namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s: %w", name, err)
		}
		claims := f.client.ResourceV1().ResourceClaims(f.namespace)
		for attempt := 0; ; attempt++ {
			claim, err := claims.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			err = releaseClaim(ctx, f.client, claim)
			if err == nil || !apierrors.IsConflict(err) || attempt > 10 {
				return err
			}
		}
	})
}

func releaseClaim(ctx context.Context, client kubernetes.Interface, claim *resourceapi.ResourceClaim) error {
	claims := client.ResourceV1().ResourceClaims(claim.Namespace)
	if claim.Status.Allocation != nil || len(claim.Status.ReservedFor) > 0 {
		claim.Status = resourceapi.ResourceClaimStatus{}
		var err error
		if claim, err = claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if len(claim.Finalizers) > 0 {
		claim.Finalizers = nil
		var err error
		if claim, err = claims.Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	err := claims.Delete(ctx, claim.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

var errTimeout = errors.New("timed out")

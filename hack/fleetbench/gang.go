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
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// The gang workloads: training jobs on a GB200 fleet, each of `gang` pods,
// every pod one tray's 4 GPUs through a claim of its own. With channel,
// the job also has one standalone ResourceClaim for an NVLink channel
// that every pod of the job names: the fallback where the Workload API's
// PodGroup claims are off, as they are on the benchmark's kube-scheduler
// (GenericWorkload is not enabled). The first pod of a job allocates the
// channel, and with it the domain's node selector; the others find the
// claim allocated and only check it.
//
// A standalone claim does not place a job whole: two jobs whose first
// pods pick the same rack would not both fit. Each job's pods therefore
// carry a node selector on the domain label, one job per rack, which is
// what Kueue's topology-aware scheduling writes with a level on
// gpu.gpudra.io/nvlink-domain. The jobs without a channel carry the same
// selector, so that the two workloads differ only by the channel claim.

// gangJobs is how many jobs a gang workload runs on n trays: at most one
// per rack that holds a whole job, and at most maxPods pods.
func gangJobs(w workload, n, maxPods int) int {
	racks := n / traysPerDomain
	if w.gang > traysPerDomain {
		racks = 0
	}
	return max(0, min(racks, maxPods/w.gang))
}

// gangNames are job j's names: its channel claim, and its pods (each pod's
// GPU claim has its pod's name).
func gangNames(w workload, j int) (channel string, pods []string) {
	for p := range w.gang {
		pods = append(pods, fmt.Sprintf("%s-%d-%d", w.name, j, p))
	}
	return fmt.Sprintf("%s-%d-nvlink", w.name, j), pods
}

// trayClaimSpec is one pod's claim: all 4 GPUs of a tray, as in
// docs/nvlink.md's manifests.
func trayClaimSpec() resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: "gpu.gpudra.io", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: gpusPerTray,
		},
	}}}}
}

// channelClaimSpec is a job's channel claim: one exclusive channel.
func channelClaimSpec() resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nvlink-channel.gpudra.io"},
	}}}}
}

// gangPod is one pod of a job: its tray's claim, the job's channel claim
// when it has one, and the job's rack as node selector.
func gangPod(namespace, name, channelClaim, domain string) *v1.Pod {
	p := pod(namespace, name, name)
	p.Spec.ResourceClaims[0].Name = "gpus"
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpus"}}
	if channelClaim != "" {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "nvlink", ResourceClaimName: &channelClaim})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: "nvlink"})
	}
	p.Spec.NodeSelector = map[string]string{slicebuilder.NVLinkDomainLabel(driverName): domain}
	return p
}

// gangCell runs the jobs of a gang workload as one burst: their claims
// first, then all their pods, job after job.
func (r *runner) gangCell(ctx context.Context, w workload, state string) (cellResult, error) {
	f := r.fleet
	jobs := gangJobs(w, len(f.nodes), r.maxPods)
	res := cellResult{Workload: w.name, State: state, Jobs: jobs}
	if jobs == 0 {
		res.Skipped = fmt.Sprintf("%d trays hold no %d-tray job in one rack, or --max-pods is below %d", len(f.nodes), w.gang, w.gang)
		return res, nil
	}
	var names, claims []string
	var pods []*v1.Pod
	for j := range jobs {
		channel, jobPods := gangNames(w, j)
		// Job j in rack j: racks fill in node order, so each job has a
		// rack to itself.
		domain := domainOfRack(j)
		if !w.channel {
			channel = ""
		} else {
			claims = append(claims, channel)
		}
		for _, name := range jobPods {
			pods = append(pods, gangPod(f.namespace, name, channel, domain))
		}
		names = append(names, jobPods...)
	}
	res.Pods = len(pods)
	defer r.binds.forget(names)

	err := parallel(len(names)+len(claims), apiWorkers, func(i int) error {
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace}}
		if i < len(names) {
			claim.Name, claim.Spec = names[i], trayClaimSpec()
		} else {
			claim.Name, claim.Spec = claims[i-len(names)], channelClaimSpec()
		}
		if _, err := f.client.ResourceV1().ResourceClaims(f.namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create claim %s: %w", claim.Name, err)
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if err := r.burst(ctx, &res, pods, names); err != nil {
		return res, err
	}
	// The pods and their tray claims, then the channel claims (release
	// deletes the pod of a name and the claim of that name).
	if err := f.release(ctx, append(names, claims...)); err != nil {
		return res, fmt.Errorf("release: %w", err)
	}
	time.Sleep(settle)
	return res, nil
}

// burst creates the pods as fast as the API server takes them, waits until
// the scheduler has bound them all (or the cell's time is up), and reads
// the scheduler's histograms, its CPU time and the writes seen meanwhile.
func (r *runner) burst(ctx context.Context, res *cellResult, pods []*v1.Pod, names []string) error {
	f := r.fleet
	before, err := r.metrics.scrape(ctx)
	if err != nil {
		return err
	}
	res.Load1Start = loadAverage()
	cpu0, _ := processCPU(r.schedulerPID)
	slices0, nodes0 := r.writes.read()

	start := time.Now()
	err = parallel(len(pods), apiWorkers, func(i int) error {
		_, err := f.client.CoreV1().Pods(f.namespace).Create(ctx, pods[i], metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("create pods: %w", err)
	}
	res.CreateSeconds = time.Since(start).Seconds()

	deadline := start.Add(r.cellTimeout)
	var bound []time.Time
	for {
		bound = r.binds.times(names)
		if len(bound) == len(names) {
			break
		}
		if time.Now().After(deadline) {
			res.TimedOut = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.Load1End = loadAverage()
	slices1, nodes1 := r.writes.read()
	sliceWrites, nodeWrites := slices1-slices0, nodes1-nodes0
	res.SliceWrites, res.NodeWrites = &sliceWrites, &nodeWrites
	res.Scheduled = len(bound)
	if len(bound) > 0 {
		last := bound[0]
		for _, t := range bound {
			if t.After(last) {
				last = t
			}
		}
		res.Seconds = last.Sub(start).Seconds()
		res.PodsPerSecond = float64(len(bound)) / res.Seconds
	}
	return r.measure(ctx, res, before, cpu0)
}

// writeCounter counts the ResourceSlice and Node events its watches see
// (adds, updates, deletes; not the initial list).
type writeCounter struct {
	slices, nodes atomic.Int64
}

func (w *writeCounter) read() (slices, nodes int) {
	return int(w.slices.Load()), int(w.nodes.Load())
}

// watchWrites starts watches on ResourceSlices and Nodes that count every
// change after their first list.
func watchWrites(ctx context.Context, client kubernetes.Interface) (*writeCounter, error) {
	w := &writeCounter{}
	factory := informers.NewSharedInformerFactory(client, 0)
	// Only the counts matter: keep no object.
	trim := func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	}
	var synced []cache.InformerSynced
	for _, c := range []struct {
		inf     cache.SharedIndexInformer
		counter *atomic.Int64
	}{
		{factory.Resource().V1().ResourceSlices().Informer(), &w.slices},
		{factory.Core().V1().Nodes().Informer(), &w.nodes},
	} {
		if err := c.inf.SetTransform(trim); err != nil {
			return nil, err
		}
		count := func() { c.counter.Add(1) }
		if _, err := c.inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(_ any, isInInitialList bool) {
				if !isInInitialList {
					count()
				}
			},
			UpdateFunc: func(_, _ any) { count() },
			DeleteFunc: func(_ any) { count() },
		}); err != nil {
			return nil, err
		}
		synced = append(synced, c.inf.HasSynced)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("ResourceSlice and Node informers did not sync")
	}
	return w, nil
}

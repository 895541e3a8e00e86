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
	"sync"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// churnCell is the steady state of Kubernetes' scheduler_perf DRA
// workloads (createPods with steadyState): for churnDuration, churnPods
// pods are kept in flight; as soon as one is bound it is deleted, its claim
// freed (deallocated, as the resourceclaim controller does once the pod is
// gone) and a new pod created that uses the same claim. What it measures is
// how many pods the scheduler places per second when pods come and go at
// the rate it can take them, on an empty or a 90% allocated fleet, and the
// scheduler's CPU time per pod placed.
func (r *runner) churnCell(ctx context.Context, w workload, busy bool, state string) (cellResult, error) {
	f := r.fleet
	kinds := w.kindsFor(busy)
	n := max(1, r.churnPods)
	res := cellResult{Workload: w.name, State: state}
	claimNames := make([]string, n)
	for i := range claimNames {
		claimNames[i] = fmt.Sprintf("churn-claim-%d", i)
	}
	if err := f.createClaims(ctx, claimNames, kinds); err != nil {
		return res, err
	}
	before, err := r.metrics.scrape(ctx)
	if err != nil {
		return res, err
	}
	res.Load1Start = loadAverage()
	cpu0, _ := processCPU(r.schedulerPID)

	start := time.Now()
	deadline := start.Add(r.churnDuration)
	var created, bound atomic.Int64
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for gen := 0; time.Now().Before(deadline); gen++ {
				name := fmt.Sprintf("churn-%d-%d", i, gen)
				if _, err := f.client.CoreV1().Pods(f.namespace).Create(ctx, pod(f.namespace, name, claimNames[i]), metav1.CreateOptions{}); err != nil {
					fail(fmt.Errorf("create pod %s: %w", name, err))
					return
				}
				created.Add(1)
				placed := false
				for !placed && time.Now().Before(deadline) {
					placed = len(r.binds.times([]string{name})) == 1
					if !placed {
						time.Sleep(5 * time.Millisecond)
					}
				}
				if placed {
					bound.Add(1)
				}
				if err := r.freeForReuse(ctx, name, claimNames[i]); err != nil {
					fail(err)
					return
				}
				r.binds.forget([]string{name})
			}
		})
	}
	wg.Wait()
	res.Load1End = loadAverage()
	res.Pods, res.Scheduled = int(created.Load()), int(bound.Load())
	res.Seconds = r.churnDuration.Seconds()
	res.PodsPerSecond = round(float64(res.Scheduled)/res.Seconds, 2)
	if firstErr != nil {
		return res, firstErr
	}
	if err := r.measure(ctx, &res, before, cpu0); err != nil {
		return res, err
	}
	if err := f.release(ctx, claimNames); err != nil {
		return res, fmt.Errorf("release: %w", err)
	}
	time.Sleep(settle)
	return res, nil
}

// freeForReuse deletes the pod and frees its claim for the next pod, as
// the resourceclaim controller does once a pod is gone: the allocation
// and the reservation are dropped, the claim stays.
func (r *runner) freeForReuse(ctx context.Context, podName, claimName string) error {
	f := r.fleet
	zero := int64(0)
	err := f.client.CoreV1().Pods(f.namespace).Delete(ctx, podName, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s: %w", podName, err)
	}
	claims := f.client.ResourceV1().ResourceClaims(f.namespace)
	for attempt := 0; ; attempt++ {
		claim, err := claims.Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("free claim %s: %w", claimName, err)
		}
		if claim.Status.Allocation == nil && len(claim.Status.ReservedFor) == 0 {
			return nil
		}
		claim.Status = resourceapi.ResourceClaimStatus{}
		_, err = claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		if err == nil || !apierrors.IsConflict(err) || attempt > 10 {
			if err != nil {
				return fmt.Errorf("free claim %s: %w", claimName, err)
			}
			return nil
		}
	}
}

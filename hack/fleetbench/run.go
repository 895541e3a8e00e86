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
	"fmt"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// runResult is everything one run (one fleet size, one layout, a fresh
// control plane) measured.
type runResult struct {
	Nodes   int          `json:"nodes"`
	Layout  string       `json:"layout"`
	Profile string       `json:"profile"`
	Started time.Time    `json:"started"`
	Publish publishStats `json:"publish"`
	// API server memory once the nodes and slices are in (MiB), and its
	// peak over the whole run.
	APIServerRSSMiB  float64      `json:"apiServerRSSMiB"`
	APIServerPeakMiB float64      `json:"apiServerPeakMiB"`
	SchedulerRSSMiB  float64      `json:"schedulerRSSMiB"`
	Cells            []cellResult `json:"cells"`
}

// cellResult is one workload on one fleet state.
type cellResult struct {
	Workload string `json:"workload"`
	// State is "empty" or "90%".
	State string `json:"state"`
	// Skipped says why the cell was not run (a MIG workload on a layout
	// without MIG).
	Skipped   string `json:"skipped,omitempty"`
	Pods      int    `json:"pods"`
	Scheduled int    `json:"scheduled"`
	// CreateSeconds is how long creating the pods took; Seconds from the
	// first create to the last binding.
	CreateSeconds float64 `json:"createSeconds"`
	Seconds       float64 `json:"seconds"`
	PodsPerSecond float64 `json:"podsPerSecond"`
	// From the scheduler's histograms, in milliseconds: the scheduling
	// algorithm for one pod (PreFilter, Filter on the nodes it tries,
	// Score: what the scheduler does one pod at a time, so what bounds
	// pods/s); one attempt that placed a pod (algorithm and binding,
	// which runs beside the next pods); the pod's scheduling SLI (first
	// attempt to bound, queueing included); one DRA Filter call on one
	// node (sampled by the scheduler).
	AlgorithmP50 millis `json:"algorithmP50ms"`
	AlgorithmP99 millis `json:"algorithmP99ms"`
	AttemptP50   millis `json:"attemptP50ms"`
	AttemptP99   millis `json:"attemptP99ms"`
	SLIP50       millis `json:"sliP50ms"`
	SLIP99       millis `json:"sliP99ms"`
	FilterP50    millis `json:"draFilterP50ms"`
	FilterP99    millis `json:"draFilterP99ms"`
	// UnschedulableAttempts counts attempts that found no node.
	UnschedulableAttempts float64 `json:"unschedulableAttempts"`
	// SchedulerCPUSeconds is the CPU time kube-scheduler used during the
	// cell (from /proc), CPUMsPerPod that per pod bound: steadier on a
	// loaded machine than pods/s, which waits for the CPU too.
	SchedulerCPUSeconds float64 `json:"schedulerCPUSeconds"`
	CPUMsPerPod         float64 `json:"cpuMsPerPod"`
	TimedOut            bool    `json:"timedOut,omitempty"`
	// Jobs: the gang workloads' jobs (Pods is their pods). SliceWrites
	// and NodeWrites count the ResourceSlice and Node events (create,
	// update, delete) the benchmark's watches saw from the first pod
	// created to the last bound: what the cell wrote there.
	Jobs        int     `json:"jobs,omitempty"`
	SliceWrites *int    `json:"sliceWrites,omitempty"`
	NodeWrites  *int    `json:"nodeWrites,omitempty"`
	Load1Start  float64 `json:"load1Start"`
	Load1End    float64 `json:"load1End"`
}

// runner runs the cells of one run against one fleet.
type runner struct {
	fleet *fleet
	// profile is the fake nodes' (fakenodes.WithNode).
	profile     string
	writes      *writeCounter
	metrics     *schedulerMetrics
	maxPods     int
	cellTimeout time.Duration
	binds       *bindTracker
	// schedulerPID is kube-scheduler's, for its CPU time.
	schedulerPID int
	// churn is the steady-state workload's length and pods in flight.
	churnDuration time.Duration
	churnPods     int
	// only, when not empty, lists the cells to run as "workload/state"
	// (for a profile of one of them).
	only map[string]bool
}

// bindTracker records when each pod of the namespace was first seen bound.
type bindTracker struct {
	mu    sync.Mutex
	bound map[string]time.Time
}

func (b *bindTracker) observe(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, seen := b.bound[pod.Name]; !seen {
		b.bound[pod.Name] = now
	}
}

// times returns the binding times of the named pods seen so far.
func (b *bindTracker) times(names []string) []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []time.Time
	for _, n := range names {
		if t, ok := b.bound[n]; ok {
			out = append(out, t)
		}
	}
	return out
}

func (b *bindTracker) forget(names []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range names {
		delete(b.bound, n)
	}
}

// watchBinds starts an informer on the fleet's pods.
func watchBinds(ctx context.Context, f *fleet) (*bindTracker, error) {
	b := &bindTracker{bound: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(f.client, 0, informers.WithNamespace(f.namespace))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    b.observe,
		UpdateFunc: func(_, obj any) { b.observe(obj) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("pod informer did not sync")
	}
	return b, nil
}

// settle gives the scheduler's informers time to see a burst of changes
// (busy claims, released pods) before the next cell measures.
const settle = 3 * time.Second

// warmUp waits until the scheduler schedules: its informers hold every
// node and slice (thousands of them at 1000 nodes) only some time after it
// starts, and the first workload must not measure that.
func (r *runner) warmUp(ctx context.Context) error {
	f := r.fleet
	p := pod(f.namespace, "warm-up", "")
	p.Spec.ResourceClaims, p.Spec.Containers[0].Resources.Claims = nil, nil
	if _, err := f.client.CoreV1().Pods(f.namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create warm-up pod: %w", err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for len(r.binds.times([]string{p.Name})) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("warm-up pod: %w", errTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.binds.forget([]string{p.Name})
	zero := int64(0)
	if err := f.client.CoreV1().Pods(f.namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return err
	}
	time.Sleep(settle)
	return nil
}

// run measures every workload on the empty fleet and on the 90% one.
func (r *runner) run(ctx context.Context, layout string) ([]cellResult, error) {
	logger := klog.FromContext(ctx)
	if err := r.warmUp(ctx); err != nil {
		return nil, err
	}
	var out []cellResult
	type phase struct {
		state  string
		busy   bool
		packed bool
	}
	phases := []phase{{"empty", false, false}, {"90%", true, false}, {"90%", true, true}}
	if isGB200(r.profile) {
		// The busy states are of 8-GPU nodes; the gang jobs run on
		// the empty fleet.
		phases = phases[:1]
	}
	for _, ph := range phases {
		var hid hidden
		if ph.busy {
			if err := r.fleet.fill(ctx, ph.packed); err != nil {
				return out, err
			}
			if hidesBusy(layout) {
				var err error
				if hid, err = r.fleet.hideBusy(ctx, ph.packed, layout, r.profile); err != nil {
					return out, fmt.Errorf("hide the placements of busy GPUs: %w", err)
				}
			}
			time.Sleep(settle)
		}
		for _, w := range workloads {
			if ph.busy && w.busyPacked != ph.packed {
				continue
			}
			if len(r.only) > 0 && !r.only[w.name+"/"+ph.state] {
				continue
			}
			if (w.gang > 0) != isGB200(r.profile) {
				continue
			}
			if w.needsMIG(ph.busy) && !hasMIG(layout) {
				out = append(out, cellResult{Workload: w.name, State: ph.state, Skipped: "no MIG in this layout"})
				continue
			}
			var res cellResult
			var err error
			switch {
			case w.gang > 0:
				res, err = r.gangCell(ctx, w, ph.state)
			case w.churn:
				res, err = r.churnCell(ctx, w, ph.busy, ph.state)
			default:
				res, err = r.cell(ctx, w, ph.busy, ph.state)
			}
			if err != nil {
				return out, fmt.Errorf("%s, %s: %w", w.name, ph.state, err)
			}
			logger.Info("Cell done", "layout", layout, "workload", w.name, "state", ph.state,
				"pods", res.Pods, "scheduled", res.Scheduled, "podsPerSecond", res.PodsPerSecond,
				"algorithmP99ms", res.AlgorithmP99, "load1", res.Load1End)
			out = append(out, res)
		}
		if ph.busy {
			if err := r.fleet.empty(ctx); err != nil {
				return out, err
			}
			if err := r.fleet.unhide(ctx, hid); err != nil {
				return out, err
			}
			time.Sleep(settle)
		}
	}
	return out, nil
}

// cell creates the workload's claims, then its pods as fast as the API
// server takes them, waits until the scheduler has bound them all (or the
// cell's time is up), reads the scheduler's histograms, and releases
// everything.
func (r *runner) cell(ctx context.Context, w workload, busy bool, state string) (cellResult, error) {
	f := r.fleet
	kinds := w.kindsFor(busy)
	n := w.pods(len(f.nodes), r.maxPods, busy)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", w.name, i)
	}
	res := cellResult{Workload: w.name, State: state, Pods: n}
	defer r.binds.forget(names)

	if err := f.createClaims(ctx, names, kinds); err != nil {
		return res, err
	}
	before, err := r.metrics.scrape(ctx)
	if err != nil {
		return res, err
	}
	res.Load1Start = loadAverage()
	cpu0, _ := processCPU(r.schedulerPID)

	start := time.Now()
	err = parallel(n, apiWorkers, func(i int) error {
		_, err := f.client.CoreV1().Pods(f.namespace).Create(ctx, pod(f.namespace, names[i], names[i]), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return res, fmt.Errorf("create pods: %w", err)
	}
	res.CreateSeconds = time.Since(start).Seconds()

	deadline := start.Add(r.cellTimeout)
	var bound []time.Time
	for {
		bound = r.binds.times(names)
		if len(bound) == n {
			break
		}
		if time.Now().After(deadline) {
			res.TimedOut = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.Load1End = loadAverage()
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

	if err := r.measure(ctx, &res, before, cpu0); err != nil {
		return res, err
	}
	if err := f.release(ctx, names); err != nil {
		return res, fmt.Errorf("release: %w", err)
	}
	time.Sleep(settle)
	return res, nil
}

// measure fills in what the scheduler's histograms and its CPU time say
// about the cell since before and cpu0 were read.
func (r *runner) measure(ctx context.Context, res *cellResult, before scrape, cpu0 float64) error {
	if cpu1, err := processCPU(r.schedulerPID); err == nil {
		res.SchedulerCPUSeconds = round(cpu1-cpu0, 2)
		if res.Scheduled > 0 {
			res.CPUMsPerPod = round((cpu1-cpu0)*1000/float64(res.Scheduled), 2)
		}
	}
	after, err := r.metrics.scrape(ctx)
	if err != nil {
		return err
	}
	ms := func(h histogram, q float64) millis { return millis(round(h.quantile(q)*1000, 3)) }
	algorithm := after.histogram("scheduler_scheduling_algorithm_duration_seconds", nil).
		minus(before.histogram("scheduler_scheduling_algorithm_duration_seconds", nil))
	attempt := after.histogram("scheduler_scheduling_attempt_duration_seconds", map[string]string{"result": "scheduled"}).
		minus(before.histogram("scheduler_scheduling_attempt_duration_seconds", map[string]string{"result": "scheduled"}))
	sli := after.histogram("scheduler_pod_scheduling_sli_duration_seconds", nil).
		minus(before.histogram("scheduler_pod_scheduling_sli_duration_seconds", nil))
	draFilter := map[string]string{"plugin": "DynamicResources", "extension_point": "Filter"}
	filter := after.histogram("scheduler_plugin_execution_duration_seconds", draFilter).
		minus(before.histogram("scheduler_plugin_execution_duration_seconds", draFilter))
	res.AlgorithmP50, res.AlgorithmP99 = ms(algorithm, 0.5), ms(algorithm, 0.99)
	res.AttemptP50, res.AttemptP99 = ms(attempt, 0.5), ms(attempt, 0.99)
	res.SLIP50, res.SLIP99 = ms(sli, 0.5), ms(sli, 0.99)
	res.FilterP50, res.FilterP99 = ms(filter, 0.5), ms(filter, 0.99)
	unsched := map[string]string{"result": "unschedulable"}
	res.UnschedulableAttempts = after.counter("scheduler_schedule_attempts_total", unsched) - before.counter("scheduler_schedule_attempts_total", unsched)
	return nil
}

// millis is a duration in milliseconds from a histogram; NaN (nothing was
// observed) is null in JSON.
type millis float64

func (m millis) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(m)) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(m))
}

func (m *millis) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*m = millis(math.NaN())
		return nil
	}
	return json.Unmarshal(data, (*float64)(m))
}

// round rounds to the given number of decimals; NaN stays NaN.
func round(v float64, decimals int) float64 {
	if math.IsNaN(v) {
		return v
	}
	p := math.Pow(10, float64(decimals))
	return math.Round(v*p) / p
}

// createClaims creates one claim per name, of the kinds in turn.
func (f *fleet) createClaims(ctx context.Context, names []string, kinds []claimKind) error {
	err := parallel(len(names), apiWorkers, func(i int) error {
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: names[i]}, Spec: claimSpec(kinds[i%len(kinds)])}
		_, err := f.client.ResourceV1().ResourceClaims(f.namespace).Create(ctx, claim, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("create claims: %w", err)
	}
	return nil
}

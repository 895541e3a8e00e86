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
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metaapply "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceapply "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// Claim status (KEP-4817, GA in Kubernetes 1.37): for every device of a
// claim it prepared, the plugin writes an entry in the claim's
// status.devices with a Ready condition and a DeviceStatus
// (resource.gpudra.io/v1alpha1) that names the physical device (GPU or MIG
// UUID, PCI bus ID, model), the MIG placement, and how it is shared; at
// unprepare it removes them, since the devices are no longer set up (the
// API server itself drops them when the claim is deallocated).
//
// The entries are written with server-side apply under one field manager
// per driver, so nothing else in the status is touched, and only ever for
// this driver's devices. The API server allows that to a ServiceAccount
// on the claim's node that may "associated-node:patch" the synthetic
// resource resourceclaims/driver with this driver's name, besides "patch"
// on resourceclaims/status (the chart's ClusterRole; docs/security.md).
//
// Writes run in the background: a pod's start never waits for the API
// server, and a write that fails is retried with back-off; a claim that is
// gone, or no longer allocated, is given up on.

// claimStatusFieldManager is the field manager of the plugin's status
// entries; suffixed with the driver name.
const claimStatusFieldManager = "gpudra-kubelet-plugin"

// Condition of each entry.
const (
	conditionReady = "Ready"
	reasonPrepared = "Prepared"
)

// statusRetries bounds the tries of one write; statusBackoff is the first
// wait between them, doubled each time.
const (
	statusRetries = 6
	statusBackoff = 500 * time.Millisecond
)

// claimStatus writes the status.devices of the claims the plugin prepares.
//
// The claims to write are keys in a client-go workqueue: it holds each
// claim once however often its status changes, hands a claim to one write
// at a time, and brings a refused write back after its back-off (the
// queue's exponential rate limiter: backoff, doubled each try). What to
// write is the claim's entry in pending, the latest status queued.
type claimStatus struct {
	client  kubernetes.Interface
	driver  string
	node    string
	manager string
	metrics *Instruments
	// backoff is the first wait between tries (statusBackoff; shorter in
	// tests).
	backoff time.Duration

	// mu guards pending, written and q.
	mu      sync.Mutex
	pending map[types.UID]*statusWrite
	// written is the last status applied per claim, so that a repeated
	// prepare (the kubelet retries, restarts) writes nothing.
	written map[types.UID]string
	// q and limiter are made by run; until then statuses wait in pending.
	q       workqueue.TypedRateLimitingInterface[types.UID]
	limiter workqueue.TypedRateLimiter[types.UID]
	// yield, when set, waits until the kubelet's calls in flight end
	// (callgate.go); writes wait for it.
	yield func(context.Context)
}

// statusWrite is the status one claim should have: its entries, or none.
type statusWrite struct {
	ref     types.NamespacedName
	uid     types.UID
	devices []*resourceapply.AllocatedDeviceStatusApplyConfiguration
	key     string    // what written compares
	tries   int       // refused tries so far
	due     time.Time // when the next try is; zero: now
}

func newClaimStatus(client kubernetes.Interface, driver, node string, m *Instruments) *claimStatus {
	return &claimStatus{
		client: client, driver: driver, node: node, manager: claimStatusFieldManager + "/" + driver, metrics: m, backoff: statusBackoff,
		pending: map[types.UID]*statusWrite{}, written: map[types.UID]string{},
	}
}

// prepared queues the status of a claim the node state prepared.
func (s *claimStatus) prepared(rec checkpoint.Claim, node gpu.Node) {
	devices, key := deviceStatuses(s.driver, rec, node, time.Now())
	s.queue(&statusWrite{ref: types.NamespacedName{Namespace: rec.Namespace, Name: rec.Name}, uid: types.UID(rec.UID), devices: devices, key: key})
}

// unprepared queues the removal of a claim's entries.
func (s *claimStatus) unprepared(ref types.NamespacedName, uid types.UID) {
	s.queue(&statusWrite{ref: ref, uid: uid})
}

func (s *claimStatus) queue(w *statusWrite) {
	s.mu.Lock()
	if w.key != "" && s.written[w.uid] == w.key {
		// Written already (a repeated prepare): nothing to do. Removals
		// are always sent: a claim prepared before the plugin restarted
		// has entries this process did not write.
		delete(s.pending, w.uid)
		s.mu.Unlock()
		return
	}
	s.pending[w.uid] = w
	q := s.q
	if q != nil {
		// A new status starts its tries afresh, now.
		q.Forget(w.uid)
	}
	s.mu.Unlock()
	if q != nil {
		q.Add(w.uid)
	}
}

// run writes queued statuses until ctx ends.
func (s *claimStatus) run(ctx context.Context) {
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](s.backoff, s.backoff<<statusRetries)
	// Unnamed: the queue exports no workqueue_* metrics (the outcome of
	// each write is gpudra_plugin_claim_status_writes_total).
	q := workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[types.UID]{})
	s.mu.Lock()
	s.q, s.limiter = q, limiter
	for uid := range s.pending {
		q.Add(uid)
	}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, q.ShutDown)
	defer stop()
	defer q.ShutDown()
	for {
		uid, shutdown := q.Get()
		if shutdown {
			return
		}
		// Everything queued by now is written in one go, after one
		// yield (below).
		batch := []types.UID{uid}
		for q.Len() > 0 {
			uid, shutdown := q.Get()
			if shutdown {
				break
			}
			batch = append(batch, uid)
		}
		s.writeDue(ctx, batch)
		for _, uid := range batch {
			q.Done(uid)
		}
	}
}

// writeDue writes the statuses of the claims that are due, and schedules
// the retries of those refused.
func (s *claimStatus) writeDue(ctx context.Context, batch []types.UID) {
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	var due []*statusWrite
	for _, uid := range batch {
		w := s.pending[uid]
		switch {
		case w == nil:
			// Written or given up on since it was queued.
		case w.due.After(now):
			// Handed out before its retry is due (an older status's
			// retry): back at the time.
			s.q.AddAfter(uid, w.due.Sub(now))
		default:
			due = append(due, w)
		}
	}
	s.mu.Unlock()
	if len(due) > 0 && s.yield != nil {
		// The pods being prepared wait for their prepares, not for
		// their claims' status: the writes go after the calls.
		s.yield(ctx)
	}
	for _, w := range due {
		err := s.apply(ctx, w)
		try := w.tries + 1
		s.mu.Lock()
		current := s.pending[w.uid]
		switch {
		case current != w:
			// A newer status was queued meanwhile: the queue hands the
			// claim out again once this write is done.
		case err == nil || !retryable(err) || try >= statusRetries:
			delete(s.pending, w.uid)
			s.q.Forget(w.uid)
			if err == nil && w.key != "" {
				s.written[w.uid] = w.key
			} else {
				delete(s.written, w.uid)
			}
		default:
			w.tries = try
			delay := s.limiter.When(w.uid) // backoff << (tries-1)
			w.due = time.Now().Add(delay)
			s.q.AddAfter(w.uid, delay)
		}
		s.mu.Unlock()
		s.report(ctx, w, try, err)
	}
}

func (s *claimStatus) apply(ctx context.Context, w *statusWrite) error {
	status := resourceapply.ResourceClaimStatus()
	if len(w.devices) > 0 {
		status = status.WithDevices(w.devices...)
	}
	ac := resourceapply.ResourceClaim(w.ref.Name, w.ref.Namespace).WithUID(w.uid).WithStatus(status)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.client.ResourceV1().ResourceClaims(w.ref.Namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: s.manager, Force: true})
	return err
}

// retryable: the claim may take the write later. A claim that is gone
// (or replaced: the UID differs), no longer allocated (the API server
// refuses entries for devices it does not hold) or that this plugin may
// not write (RBAC) will not.
func retryable(err error) bool {
	return !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err)
}

func (s *claimStatus) report(ctx context.Context, w *statusWrite, try int, err error) {
	logger := klog.FromContext(ctx)
	what := "write"
	if w.key == "" {
		what = "clear"
	}
	switch {
	case err == nil:
		s.metrics.statusWrites.WithLabelValues(statusResultSuccess).Inc()
		logger.V(4).Info("Claim status", "action", what, "claim", w.ref, "devices", len(w.devices))
	case !retryable(err) && (apierrors.IsNotFound(err) || apierrors.IsConflict(err) || w.key == "" && apierrors.IsInvalid(err)):
		// Gone, replaced, or deallocated: nothing to report on.
		s.metrics.statusWrites.WithLabelValues(statusResultGone).Inc()
		logger.V(4).Info("Claim status not written: the claim is gone or deallocated", "action", what, "claim", w.ref, "reason", err.Error())
	default:
		s.metrics.statusWrites.WithLabelValues(statusResultError).Inc()
		hint := ""
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) && strings.Contains(err.Error(), "resourceclaims/driver") {
			hint = fmt.Sprintf(`the plugin's ServiceAccount needs "patch" on resourceclaims/status and "associated-node:patch" on resourceclaims/driver with resourceNames [%s] (the chart's ClusterRole has both)`, s.driver)
		}
		logger.Error(err, "Claim status not written", "action", what, "claim", w.ref, "try", try, "hint", hint)
	}
}

// deviceStatuses are the status.devices entries of a prepared claim, and
// a key that is equal for equal entries (their time aside).
func deviceStatuses(driver string, rec checkpoint.Claim, node gpu.Node, now time.Time) ([]*resourceapply.AllocatedDeviceStatusApplyConfiguration, string) {
	byUUID := map[string]gpu.GPU{}
	for _, g := range node.GPUs {
		byUUID[g.UUID] = g
	}
	var out []*resourceapply.AllocatedDeviceStatusApplyConfiguration
	var keys []string
	for _, d := range rec.Devices {
		st := deviceStatus(d, byUUID[d.GPUUUID])
		data, err := json.Marshal(st)
		if err != nil {
			continue // plain data: cannot happen
		}
		msg := fmt.Sprintf("prepared on node %s: %s", node.Name, strings.Join(d.CDIDeviceIDs, ", "))
		e := resourceapply.AllocatedDeviceStatus().
			WithDriver(driver).WithPool(d.Pool).WithDevice(d.Device).
			WithConditions(metaapply.Condition().WithType(conditionReady).WithStatus(metav1.ConditionTrue).
				WithReason(reasonPrepared).WithMessage(msg).WithLastTransitionTime(metav1.NewTime(now.Truncate(time.Second)))).
			WithData(runtime.RawExtension{Raw: data})
		if d.ShareID != "" {
			e = e.WithShareID(d.ShareID)
		}
		out = append(out, e)
		keys = append(keys, d.Pool+"/"+d.Device+"/"+d.ShareID+"="+msg+string(data))
	}
	return out, strings.Join(keys, "\n")
}

// deviceStatus is what status.devices[].data says of one device.
func deviceStatus(d checkpoint.Device, g gpu.GPU) *configapi.DeviceStatus {
	st := configapi.NewDeviceStatus()
	if d.Channel != nil {
		return st // an IMEX channel is no GPU: its pool and name say all
	}
	st.UUID, st.PCIBusID, st.ProductName, st.Minor = d.GPUUUID, g.PCIBusID, g.ProductName, g.Minor
	st.AdminAccess = d.AdminAccess
	if m := d.Mig; m != nil {
		st.UUID, st.ParentUUID = m.UUID, d.GPUUUID
		st.MIG = &configapi.MigDeviceStatus{Profile: m.Profile, PlacementStart: m.PlacementStart, PlacementSize: m.PlacementSize,
			GPUInstanceID: m.GPUInstanceID, ComputeInstanceID: m.ComputeInstanceID}
	}
	if len(d.Config) > 0 {
		if cfg, err := configapi.DecodeNonStrict(d.Config); err == nil {
			switch c := cfg.(type) {
			case *configapi.GpuConfig:
				st.DriverCapabilities = c.DriverCapabilities
			case *configapi.MigConfig:
				st.DriverCapabilities = c.DriverCapabilities
			}
		}
	}
	if sh := d.Sharing; sh != nil {
		ss := &configapi.SharingStatus{Strategy: configapi.SharingStrategy(sh.Strategy)}
		if sh.Strategy == checkpoint.SharingTimeSlicing && sh.TimeSlice >= 0 && sh.TimeSlice < len(configapi.SupportedTimeSliceIntervals) {
			ss.TimeSliceInterval = configapi.TimeSliceInterval(configapi.SupportedTimeSliceIntervals[sh.TimeSlice])
		}
		if sh.ActiveThreadPercentage > 0 {
			p := sh.ActiveThreadPercentage
			ss.ActiveThreadPercentage = &p
		}
		if sh.PinnedMemoryMiB > 0 {
			q := resource.NewQuantity(sh.PinnedMemoryMiB<<20, resource.BinarySI)
			ss.PinnedDeviceMemoryLimit = q
		}
		st.Sharing = ss
	}
	return st
}

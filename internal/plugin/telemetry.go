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
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/idle"
	"github.com/gpudra/gpudra/internal/nodestate"
)

// The plugin reads every GPU's (and every prepared MIG device's) use from
// NVML once per TelemetryInterval and exports it per device, labelled with
// the claim that holds the device and the pods the claim is reserved for,
// so that "GPU utilization per pod" needs no other exporter. The same pass
// feeds the idle tracker.

// deviceUse is one device's last sample and who holds it.
type deviceUse struct {
	device, uuid, model    string
	namespace, claim, pods string
	sample                 gpu.Sample
}

// claimIdle is one claim's idleness after the last pass.
type claimIdle struct {
	namespace, claim, pods string
	idleFor                time.Duration
	idle                   bool
}

// telemetrySnapshot is what the collector exports.
type telemetrySnapshot struct {
	devices []deviceUse
	claims  []claimIdle
}

// telemetry owns the sampling of the devices' use: the last pass, which
// the collector exports, the idle tracker it feeds, and the pods each
// prepared claim is reserved for.
type telemetry struct {
	// What it reads, set by Start before the kubelet can call and before
	// the sampling loop starts; only read after: cfg is the driver's, pub
	// gives the inventory and the MIG instances gpudra did not create.
	cfg     Config
	state   *nodestate.State
	pub     *publisher
	health  *healthTracker
	metrics *Instruments

	// tracker is used by the sampling loop alone (sample).
	tracker idle.Tracker
	// last is the last pass: sample stores it, the collector loads it.
	last atomic.Pointer[telemetrySnapshot]

	// mu guards pods and seen.
	mu sync.Mutex
	// pods are the pods each claim (by UID) is reserved for, from the
	// claim the kubelet handed to prepare (or, after a restart, read back
	// once); seen is when the plugin first saw the claim prepared.
	pods map[string]string
	seen map[string]time.Time
}

func newTelemetry(cfg Config, state *nodestate.State, pub *publisher, health *healthTracker, metrics *Instruments) *telemetry {
	return &telemetry{
		cfg:     cfg,
		state:   state,
		pub:     pub,
		health:  health,
		metrics: metrics,
		tracker: idle.Tracker{Threshold: cfg.IdleThreshold, After: cfg.IdleAfter},
		pods:    map[string]string{},
		seen:    map[string]time.Time{},
	}
}

// rememberPods records the pods a claim is reserved for.
func (t *telemetry) rememberPods(claim *resourceapi.ResourceClaim) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pods[string(claim.UID)] = reservedPods(claim)
}

// reservedPods lists the pods of the claim's reservedFor, sorted and
// comma-separated.
func reservedPods(claim *resourceapi.ResourceClaim) string {
	var pods []string
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "pods" && r.APIGroup == "" {
			pods = append(pods, r.Name)
		}
	}
	sort.Strings(pods)
	return strings.Join(pods, ",")
}

// loop samples once per TelemetryInterval until ctx is done.
func (t *telemetry) loop(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) { t.sample(ctx, time.Now()) }, t.cfg.TelemetryInterval)
}

// sample reads every device once, feeds the idle tracker and replaces
// what the collector exports.
func (t *telemetry) sample(ctx context.Context, now time.Time) {
	claims := t.state.Claims()
	held := heldDevices(claims)
	t.fillPods(ctx, claims)
	pods, seen := t.notePrepared(now, claims)
	snap := &telemetrySnapshot{}
	var utilization map[string]*float64
	snap.devices, utilization = t.sampleDevices(ctx, t.pub.currentNode(), held, pods)
	t.tracker.Observe(now, utilization)
	snap.claims = t.claimsIdle(now, claims, pods, seen)
	t.last.Store(snap)
}

// sampledDevices is who holds what a sampling pass reads: a device in a
// workload claim is labelled with it; admin access (a monitoring pod)
// does not hold a device.
type sampledDevices struct {
	holders  map[string]checkpoint.Claim // by device name
	migs     map[string]string           // MIG device name → MIG UUID
	migOrder []string                    // the MIG devices, as first met
}

// heldDevices is who holds the devices of the prepared claims, and the
// MIG devices prepared.
func heldDevices(claims []checkpoint.Claim) sampledDevices {
	held := sampledDevices{holders: map[string]checkpoint.Claim{}, migs: map[string]string{}}
	for _, c := range claims {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		for _, dev := range c.Devices {
			if dev.Mig != nil && dev.Mig.UUID != "" {
				if _, dup := held.migs[dev.Device]; !dup {
					held.migOrder = append(held.migOrder, dev.Device)
				}
				held.migs[dev.Device] = dev.Mig.UUID
			}
			if !dev.AdminAccess {
				held.holders[dev.Device] = c
			}
		}
	}
	return held
}

// notePrepared records when each prepared claim was first seen, forgets
// the claims gone, and returns copies of the pods and first sightings.
func (t *telemetry) notePrepared(now time.Time, claims []checkpoint.Claim) (pods map[string]string, seen map[string]time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range claims {
		if _, ok := t.seen[c.UID]; !ok && c.State == checkpoint.PrepareCompleted {
			t.seen[c.UID] = now
		}
	}
	for uid := range t.seen {
		if !slices.ContainsFunc(claims, func(c checkpoint.Claim) bool { return c.UID == uid }) {
			delete(t.seen, uid)
			delete(t.pods, uid)
		}
	}
	return maps.Clone(t.pods), maps.Clone(t.seen)
}

// sampleDevices reads every GPU of node and every MIG device prepared on
// it once: their samples, labelled with who holds them, and their
// utilization by UUID. A device that cannot be read is left out.
func (t *telemetry) sampleDevices(ctx context.Context, node gpu.Node, held sampledDevices, pods map[string]string) ([]deviceUse, map[string]*float64) {
	logger := klog.FromContext(ctx)
	var devices []deviceUse
	utilization := map[string]*float64{}
	add := func(name, uuid, model string) {
		s, err := t.cfg.Backend.Sample(uuid)
		if err != nil {
			t.metrics.sampleErrors.Inc()
			logger.V(3).Info("Sampling a device failed", "device", name, "uuid", uuid, "err", err)
			return
		}
		utilization[uuid] = s.Utilization
		u := deviceUse{device: name, uuid: uuid, model: model, sample: s}
		if c, ok := held.holders[name]; ok {
			u.namespace, u.claim, u.pods = c.Namespace, c.Name, pods[c.UID]
		}
		devices = append(devices, u)
	}
	for _, g := range node.GPUs {
		add(g.DeviceName(), g.UUID, g.ProductName)
	}
	for _, name := range held.migOrder {
		model := ""
		if md, ok := node.MigDeviceByName(name); ok {
			model = md.Parent.ProductName
		}
		add(name, held.migs[name], model)
	}
	return devices, utilization
}

// claimsIdle is how long each prepared claim's devices have been idle,
// for the claims the tracker knows enough of.
func (t *telemetry) claimsIdle(now time.Time, claims []checkpoint.Claim, pods map[string]string, seen map[string]time.Time) []claimIdle {
	var out []claimIdle
	for _, c := range claims {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		var uuids []string
		for _, dev := range c.Devices {
			if dev.AdminAccess || dev.Channel != nil {
				continue // an IMEX channel is no GPU
			}
			if dev.Mig != nil {
				uuids = append(uuids, dev.Mig.UUID)
			} else {
				uuids = append(uuids, dev.GPUUUID)
			}
		}
		idleFor, known := t.tracker.IdleFor(now, seen[c.UID], uuids)
		if !known {
			continue
		}
		out = append(out, claimIdle{namespace: c.Namespace, claim: c.Name, pods: pods[c.UID],
			idleFor: idleFor, idle: t.tracker.Idle(idleFor)})
	}
	return out
}

// fillPods reads back, once, the pods of prepared claims the plugin has
// not seen prepared since it started.
func (t *telemetry) fillPods(ctx context.Context, claims []checkpoint.Claim) {
	for _, c := range claims {
		t.mu.Lock()
		_, known := t.pods[c.UID]
		t.mu.Unlock()
		if known || c.State != checkpoint.PrepareCompleted {
			continue
		}
		pods := ""
		obj, err := t.cfg.KubeClient.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		if err == nil && string(obj.UID) == c.UID {
			pods = reservedPods(obj)
		}
		t.mu.Lock()
		t.pods[c.UID] = pods
		t.mu.Unlock()
	}
}

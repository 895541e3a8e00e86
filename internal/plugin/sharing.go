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
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/checkpoint"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nodestate"
)

// Sharing in the plugin: the health of MPS daemons, which the health
// tracker owns (the consumable-capacity fallback is the publisher's,
// publisher.go). The node state runs the daemons; the tracker checks them
// periodically, reports the devices whose daemon does not answer as
// unhealthy to the kubelet (the pods' status shows it) and has the node
// state restart them.

// nodeEvents records Events on the plugin's Node, for what an admin must
// see without reading the plugin's log.
type nodeEvents struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	node        *v1.ObjectReference
}

func newNodeEvents(ctx context.Context, client kubernetes.Interface, nodeName string) *nodeEvents {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return &nodeEvents{
		broadcaster: b,
		recorder:    b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "gpudra-kubelet-plugin", Host: nodeName}),
		// The kubelet's own Node events use the node name as UID.
		node: &v1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)},
	}
}

func (e *nodeEvents) warn(reason, message string) {
	e.recorder.Event(e.node, v1.EventTypeWarning, reason, message)
}

func (e *nodeEvents) normal(reason, message string) {
	e.recorder.Event(e.node, v1.EventTypeNormal, reason, message)
}

func (e *nodeEvents) stop() { e.broadcaster.Shutdown() }

// Event reasons.
const (
	// ReasonConsumableCapacityUnavailable: the cluster drops the fields
	// that let several claims share a GPU.
	ReasonConsumableCapacityUnavailable = "ConsumableCapacityUnavailable"
)

// ConsumableCapacityActive reports whether whole GPUs are published as
// shareable: asked for, and served by the cluster.
func (d *Driver) ConsumableCapacityActive() bool { return d.pub.consumableCapacityActive() }

// MPSDaemons is how many MPS control daemons run on the node.
func (d *Driver) MPSDaemons() int { return d.state.MPSDaemonCount() }

// mpsDaemonStates counts the MPS daemons recorded as running: those that
// answered at the last check, and those that did not (watchDaemons
// restarts them). Daemons being started or stopped are in neither.
func (h *healthTracker) mpsDaemonStates(daemons map[string]checkpoint.MPSDaemon) (running, unhealthy int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return countDaemons(daemons, h.daemonTrouble)
}

func countDaemons(daemons map[string]checkpoint.MPSDaemon, trouble map[string]string) (running, unhealthy int) {
	for id, rec := range daemons {
		switch {
		case rec.State != checkpoint.DaemonRunning:
		case trouble[id] != "":
			unhealthy++
		default:
			running++
		}
	}
	return running, unhealthy
}

// watchDaemons checks the MPS daemons of state every interval (0:
// DefaultMPSCheckInterval) until ctx ends: a daemon that does not answer
// makes its device unhealthy until the node state has it back.
func (h *healthTracker) watchDaemons(ctx context.Context, state *nodestate.State, interval time.Duration) {
	if interval == 0 {
		interval = DefaultMPSCheckInterval
	}
	_ = wait.PollUntilContextCancel(ctx, interval, false, func(ctx context.Context) (bool, error) {
		h.checkDaemons(ctx, state)
		return false, nil
	})
}

// checkDaemons probes every MPS daemon once and restarts those that do
// not answer.
func (h *healthTracker) checkDaemons(ctx context.Context, state *nodestate.State) {
	healths := state.CheckDaemons(ctx)
	if ctx.Err() != nil {
		// Stopping: a probe cut short says nothing of the daemon,
		// which must outlive this plugin.
		return
	}
	for _, dh := range healths {
		if dh.Err == nil {
			h.setDaemonTrouble(dh.ID, "")
			continue
		}
		logger := klog.FromContext(ctx).WithValues("mpsDaemon", dh.ID)
		logger.Error(dh.Err, "MPS control daemon does not answer; reporting its device unhealthy and replacing it")
		h.setDaemonTrouble(dh.ID, "MPS control daemon not answering: "+dh.Err.Error())
		if err := state.RestartDaemon(ctx, dh.ID); err != nil {
			logger.Error(err, "Restart MPS control daemon; trying again at the next check")
			continue
		}
		logger.Info("MPS control daemon is back")
		h.setDaemonTrouble(dh.ID, "")
	}
}

// setDaemonTrouble records (or, with msg empty, clears) why a device's
// daemon does not answer, and wakes the health streams on a change.
func (h *healthTracker) setDaemonTrouble(device, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.daemonTrouble[device] == msg {
		return
	}
	if msg == "" {
		delete(h.daemonTrouble, device)
	} else {
		h.daemonTrouble[device] = msg
	}
	h.wakeLocked()
}

// daemonHealthLocked marks a whole GPU whose MPS daemon does not answer
// unhealthy. The caller holds h.mu.
func (h *healthTracker) daemonHealthLocked(dh *kubeletplugin.DeviceHealth) {
	if msg, ok := h.daemonTrouble[dh.DeviceName]; ok {
		dh.Health = kubeletplugin.HealthStatusUnhealthy
		dh.Message = msg
	}
}

// migDaemonHealthLocked reports the MIG devices of node that run one of
// daemons: healthy while it answers. The caller holds h.mu.
func (h *healthTracker) migDaemonHealthLocked(node gpu.Node, daemons map[string]checkpoint.MPSDaemon, now time.Time) []kubeletplugin.DeviceHealth {
	var out []kubeletplugin.DeviceHealth
	for _, id := range slices.Sorted(maps.Keys(daemons)) {
		if _, whole := node.GPUByDeviceName(id); whole {
			continue
		}
		dh := h.deviceHealth(node.Name, id, now)
		h.daemonHealthLocked(&dh)
		out = append(out, dh)
	}
	return out
}

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

package discovery

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/gpu"
)

// waitTimeoutMs bounds each EventSet.Wait, so that a cancelled context is
// noticed within it.
const waitTimeoutMs = 1000

// retryDelay spaces out retries after an unexpected Wait error.
var retryDelay = time.Second

// noInstance is the instance ID of an event that concerns a whole GPU.
const noInstance = 0xFFFFFFFF

// HealthOptions tune WatchHealth.
type HealthOptions struct {
	// IgnoredXIDs are XIDs that do not make a GPU unhealthy: an
	// application causes them and the GPU stays fit. Nil means
	// DefaultIgnoredXIDs.
	IgnoredXIDs []uint64
	// RecheckInterval is how often an unhealthy GPU is asked whether it
	// has recovered (0: DefaultRecheckInterval).
	RecheckInterval time.Duration
	// Unhealthy are the GPUs the caller already holds unhealthy (from
	// CurrentHealth, before the watch began): the watch starts from them,
	// and reports each healthy once it recovers, even if it recovered
	// before the watch began.
	Unhealthy []gpu.HealthEvent
}

// DefaultRecheckInterval is how often an unhealthy GPU is asked whether it
// recovered, unless HealthOptions say otherwise.
const DefaultRecheckInterval = 30 * time.Second

// WatchHealth follows the NVML events of node's GPUs and sends a
// HealthEvent each time one's health (or the reason for it) changes:
// a critical XID or a double-bit ECC error makes a GPU Unhealthy; the
// XIDs in opts.IgnoredXIDs are ignored. Where the driver reports its
// recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, R565 on), the
// action decides an XID (see xidHealth), and where the GPU also delivers
// recovery-action events (nvmlEventTypeGpuRecoveryAction), each one is
// answered at once: a GPU is made Unhealthy when the driver asks for an
// action, and Healthy again as soon as it asks for none. Every
// RecheckInterval each unhealthy GPU is asked whether it recovered (see
// recovered), for the drivers without those events, and a Healthy event
// is sent when it has. A GPU whose events NVML cannot deliver is logged
// and not watched. It returns nil when ctx is cancelled, and an error
// only when watching cannot start.
func WatchHealth(ctx context.Context, lib nvml.Interface, node gpu.Node, opts HealthOptions, events chan<- gpu.HealthEvent) error {
	logger := klog.FromContext(ctx)
	if opts.IgnoredXIDs == nil {
		opts.IgnoredXIDs = DefaultIgnoredXIDs
	}
	if opts.RecheckInterval <= 0 {
		opts.RecheckInterval = DefaultRecheckInterval
	}
	set, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("create NVML event set: %w", ret)
	}
	defer func() { _ = set.Free() }()

	w := &watcher{lib: lib, events: events, byHandle: map[nvml.Device]string{}, last: map[string]gpu.HealthEvent{},
		lost: map[string]bool{}, ignored: map[uint64]bool{}, actionEvents: map[string]bool{}}
	for _, x := range opts.IgnoredXIDs {
		w.ignored[x] = true
	}
	for _, g := range node.GPUs {
		if err := w.register(ctx, lib, set, g); err != nil {
			return err
		}
	}
	// What the driver still asks for from before the watch began (an XID
	// before a plugin restart) holds until the GPU is reset: it is where
	// the watch starts from, and rechecks clear it.
	for _, ev := range opts.Unhealthy {
		// The caller holds these unhealthy already: rechecks must clear
		// them even if the GPU recovered before the watch began.
		w.last[ev.UUID] = ev
		_, w.lost[ev.UUID] = pendingRecovery(lib, ev.UUID)
	}
	for _, g := range node.GPUs {
		if reason, lost := pendingRecovery(lib, g.UUID); reason != "" {
			if _, known := w.last[g.UUID]; !known {
				w.lost[g.UUID] = lost
				w.send(ctx, gpu.HealthEvent{UUID: g.UUID, Health: gpu.Unhealthy, Reason: reason})
			}
		}
	}
	if len(w.byHandle) == 0 {
		logger.Info("No GPU delivers health events; health is not watched")
		<-ctx.Done()
		return nil
	}

	// Wait no longer than a recheck interval, so that rechecks are on
	// time while no event comes.
	wait := uint32(min(int64(waitTimeoutMs), max(1, opts.RecheckInterval.Milliseconds())))
	lastCheck := time.Now()
	for {
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(lastCheck) >= opts.RecheckInterval {
			w.recheck(ctx)
			lastCheck = time.Now()
		}
		ev, ret := set.Wait(wait)
		switch ret {
		case nvml.SUCCESS:
			w.handle(ctx, ev)
		case nvml.ERROR_TIMEOUT:
		case nvml.ERROR_GPU_IS_LOST:
			// NVML does not say which one; every GPU is suspect until
			// the recheck finds the ones that still answer.
			for _, uuid := range w.byHandle {
				w.lost[uuid] = true
				w.send(ctx, gpu.HealthEvent{UUID: uuid, Health: gpu.Unhealthy, Reason: "a GPU is lost"})
			}
			sleep(ctx, retryDelay)
		default:
			logger.Error(ret, "Waiting for NVML events failed; retrying")
			sleep(ctx, retryDelay)
		}
	}
}

// watcher is WatchHealth's state.
type watcher struct {
	lib    nvml.Interface
	events chan<- gpu.HealthEvent
	// ignored are the XIDs that leave a GPU healthy.
	ignored map[uint64]bool
	// lost marks the GPUs made unhealthy by a lost GPU (XID 79 or
	// ERROR_GPU_IS_LOST): answering again is their recovery.
	lost map[string]bool
	// byHandle maps the registered devices to their UUIDs.
	byHandle map[nvml.Device]string
	// actionEvents marks the GPUs registered for recovery-action events:
	// the driver tells when their action changes.
	actionEvents map[string]bool
	// last is the last event sent per GPU, to send changes only.
	last map[string]gpu.HealthEvent
}

// register adds a GPU's critical events to the set.
func (w *watcher) register(ctx context.Context, lib nvml.Interface, set nvml.EventSet, g gpu.GPU) error {
	logger := klog.FromContext(ctx)
	d, ret := lib.DeviceGetHandleByUUID(g.UUID)
	if ret == nvml.ERROR_GPU_IS_LOST {
		logger.Info("GPU fell off the bus before its health could be watched", "gpu", g.Index, "uuid", g.UUID)
		return nil // CurrentHealth reports it
	}
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %d (%s): get handle: %w", g.Index, g.UUID, ret)
	}
	supported, ret := d.GetSupportedEventTypes()
	if ret != nvml.SUCCESS {
		logger.Info("Cannot ask which health events a GPU supports; not watching it", "gpu", g.Index, "uuid", g.UUID, "err", ret)
		return nil
	}
	// nvmlEventTypeGpuRecoveryAction is offered from R565 on (NVML API
	// Reference, Change Log, "Changes between v560 and v565":
	// https://docs.nvidia.com/deploy/nvml-api/latest/change-log.html),
	// where the GPU supports it. The event carries no data (nvml.h,
	// nvmlEventData_t: eventData is the XID for an XID event and "0 for
	// any other event"): it says the action changed; the field says to
	// what.
	types := supported & (nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeGpuRecoveryAction)
	if types&nvml.EventTypeXidCriticalError == 0 {
		logger.Info("GPU does not report XID events; not watching it", "gpu", g.Index, "uuid", g.UUID)
		return nil
	}
	switch ret := d.RegisterEvents(types, set); ret {
	case nvml.SUCCESS:
		w.byHandle[d] = g.UUID
		w.actionEvents[g.UUID] = types&nvml.EventTypeGpuRecoveryAction != 0
		logger.V(2).Info("Watching GPU health", "gpu", g.Index, "uuid", g.UUID, "recoveryActionEvents", w.actionEvents[g.UUID])
	case nvml.ERROR_NOT_SUPPORTED:
		logger.Info("GPU cannot deliver health events; not watching it", "gpu", g.Index, "uuid", g.UUID)
	default:
		return fmt.Errorf("GPU %d (%s): register for health events: %w", g.Index, g.UUID, ret)
	}
	return nil
}

// handle turns one NVML event into a health event, if it is one.
func (w *watcher) handle(ctx context.Context, ev nvml.EventData) {
	logger := klog.FromContext(ctx)
	uuid, ok := w.byHandle[ev.Device]
	if !ok && ev.Device != nil {
		uuid, _ = ev.Device.GetUUID()
	}
	if uuid == "" {
		logger.V(2).Info("Event for an unknown device ignored", "type", ev.EventType, "data", ev.EventData)
		return
	}
	var reason string
	switch ev.EventType {
	case nvml.EventTypeXidCriticalError:
		if w.ignored[ev.EventData] {
			logger.V(2).Info("Informational XID ignored", "uuid", uuid, "xid", ev.EventData)
			return
		}
		if ev.EventData == xidFallenOffTheBus {
			// The GPU no longer answers: there is no action to read.
			w.lost[uuid] = true
			reason = xidReason(ev.EventData)
			break
		}
		var unhealthy bool
		if reason, unhealthy = w.xidHealth(ev.Device, uuid, ev.EventData); !unhealthy {
			logger.Info("XID after which the driver asks for no recovery action; the GPU stays healthy", "uuid", uuid, "xid", ev.EventData)
			return
		}
	case nvml.EventTypeDoubleBitEccError:
		reason = "double-bit ECC error"
	case nvml.EventTypeGpuRecoveryAction:
		w.actionChanged(ctx, ev.Device, uuid)
		return
	default:
		return
	}
	if ev.GpuInstanceId != noInstance && ev.ComputeInstanceId != noInstance {
		reason += fmt.Sprintf(" (MIG GPU instance %d, compute instance %d)", ev.GpuInstanceId, ev.ComputeInstanceId)
	}
	w.send(ctx, gpu.HealthEvent{UUID: uuid, Health: gpu.Unhealthy, Reason: reason})
}

// xidHealth decides a critical XID that is not in the ignore list: the
// reason to give, and whether the GPU is unhealthy.
//
// Where the driver reports its recovery action, its word decides: an
// action other than NONE makes the GPU unhealthy, the action in the
// reason. An action of NONE is the driver saying that the GPU needs
// nothing (XID 94, a contained ECC error, needs only the application
// restarted: NVIDIA, "XID Errors", https://docs.nvidia.com/deploy/xid-errors/).
// NVIDIA's own plugins taint on the XID alone (k8s-device-plugin
// internal/rm/health.go and k8s-dra-driver-gpu
// cmd/gpu-kubelet-plugin/device_health.go mark every XID outside the
// same six-XID skip list unhealthy, and never clear it but by a
// restart); here such a taint would be cleared by the next recheck
// anyway, the action being NONE, so it would only take the GPU out of
// service for up to a recheck interval and churn the slices. An
// operator wants the GPU kept: on a GPU that delivers recovery-action
// events, an XID whose action is NONE leaves it healthy, since the
// driver will report an action it asks for later as an event of its
// own. On a GPU without those events nothing would tell us of a later
// action, so the XID still taints, and the recheck clears it.
//
// A driver too old to report the action (before R565) keeps the XID
// list's verdict: unhealthy.
func (w *watcher) xidHealth(d nvml.Device, uuid string, xid uint64) (string, bool) {
	reason := xidReason(xid)
	action, ret := readRecoveryAction(d)
	switch {
	case ret != nvml.SUCCESS:
		return reason, true
	case action != nvml.GPU_RECOVERY_ACTION_NONE:
		return reason + "; the driver asks for recovery action " + recoveryActionName(action), true
	case w.actionEvents[uuid]:
		return reason, false
	default:
		return reason, true
	}
}

// actionChanged answers a recovery-action event: the driver's action for
// the GPU changed. An action other than NONE makes a healthy GPU
// unhealthy (an unhealthy one keeps its reason, usually the XID that
// raised the action); NONE is the driver's all-clear, and an unhealthy
// GPU that answers is healthy again at once, without waiting for the
// recheck.
func (w *watcher) actionChanged(ctx context.Context, d nvml.Device, uuid string) {
	logger := klog.FromContext(ctx)
	action, ret := readRecoveryAction(d)
	if ret != nvml.SUCCESS {
		logger.V(2).Info("Recovery action unreadable after its event; the recheck will ask again", "uuid", uuid, "err", ret)
		return
	}
	logger.V(2).Info("The driver's recovery action changed", "uuid", uuid, "action", recoveryActionName(action))
	last, known := w.last[uuid]
	unhealthy := known && last.Health == gpu.Unhealthy
	switch {
	case action != nvml.GPU_RECOVERY_ACTION_NONE && !unhealthy:
		w.send(ctx, gpu.HealthEvent{UUID: uuid, Health: gpu.Unhealthy, Reason: "the driver asks for recovery action " + recoveryActionName(action)})
	case action == nvml.GPU_RECOVERY_ACTION_NONE && unhealthy:
		if ok, why := recovered(w.lib, uuid, w.lost[uuid]); ok {
			delete(w.lost, uuid)
			w.send(ctx, gpu.HealthEvent{UUID: uuid, Health: gpu.Healthy, Reason: "the driver's all-clear: " + why})
		}
	}
}

// readRecoveryAction reads the action the driver asks for
// (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION): SUCCESS only where the driver
// reports it.
func readRecoveryAction(d nvml.Device) (nvml.DeviceGpuRecoveryAction, nvml.Return) {
	if d == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	values := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
	ret := d.GetFieldValues(values)
	if ret == nvml.SUCCESS {
		ret = nvml.Return(values[0].NvmlReturn)
	}
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	return nvml.DeviceGpuRecoveryAction(binary.NativeEndian.Uint32(values[0].Value[:4])), nvml.SUCCESS
}

// send delivers ev unless it repeats the GPU's last event.
func (w *watcher) send(ctx context.Context, ev gpu.HealthEvent) {
	if w.last[ev.UUID] == ev {
		return
	}
	select {
	case w.events <- ev:
		w.last[ev.UUID] = ev
		klog.FromContext(ctx).V(2).Info("GPU health changed", "uuid", ev.UUID, "health", ev.Health, "reason", ev.Reason)
	case <-ctx.Done():
	}
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// recheck asks every unhealthy GPU whether it recovered, and sends a
// Healthy event for each that did.
func (w *watcher) recheck(ctx context.Context) {
	for uuid, ev := range w.last {
		if ev.Health != gpu.Unhealthy {
			continue
		}
		ok, why := recovered(w.lib, uuid, w.lost[uuid])
		if !ok {
			klog.FromContext(ctx).V(4).Info("GPU still unhealthy", "uuid", uuid, "reason", ev.Reason, "why", why)
			continue
		}
		delete(w.lost, uuid)
		w.send(ctx, gpu.HealthEvent{UUID: uuid, Health: gpu.Healthy, Reason: why})
	}
}

// CurrentHealth is what NVML says of the GPUs' health now, without an
// event: a GPU whose driver asks for a recovery action, or that does not
// answer, is Unhealthy. An XID's recovery action stays until the GPU is
// reset or the node rebooted (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION), and a
// GPU that fell off the bus (XID 79) answers ERROR_GPU_IS_LOST until the
// reboot: so a plugin restarted in between finds both again rather than
// taking the GPU for fit. A driver too old to report the action tells
// nothing; its GPUs count as healthy until an event says otherwise.
func CurrentHealth(lib nvml.Interface, node gpu.Node) []gpu.HealthEvent {
	var out []gpu.HealthEvent
	for _, g := range node.GPUs {
		if reason, _ := pendingRecovery(lib, g.UUID); reason != "" {
			out = append(out, gpu.HealthEvent{UUID: g.UUID, Health: gpu.Unhealthy, Reason: reason})
		}
	}
	return out
}

// pendingRecovery says why the GPU is not fit now ("" when nothing says
// so), and whether that is because it does not answer (lost).
func pendingRecovery(lib nvml.Interface, uuid string) (reason string, lost bool) {
	d, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret == nvml.SUCCESS {
		_, ret = d.GetUUID()
	}
	if ret != nvml.SUCCESS {
		return "the GPU does not answer: " + ret.Error(), true
	}
	action, ret := readRecoveryAction(d)
	if ret != nvml.SUCCESS || action == nvml.GPU_RECOVERY_ACTION_NONE {
		return "", false
	}
	return "the driver asks for recovery action " + recoveryActionName(action) + " (after an error from before health monitoring started)", false
}

// recovered says whether an unhealthy GPU is fit again, and why (or why
// not). It must answer again (a lost GPU back after a reset or reboot),
// and the driver must ask for no recovery action
// (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION is NVML_GPU_RECOVERY_ACTION_NONE).
// On a driver too old to report the action, a lost GPU that answers again
// has recovered; a GPU that reported an XID stays unhealthy, since nothing
// then tells that it was reset.
func recovered(lib nvml.Interface, uuid string, wasLost bool) (bool, string) {
	d, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return false, "the GPU does not answer: " + ret.Error()
	}
	if _, ret := d.GetUUID(); ret != nvml.SUCCESS {
		return false, "the GPU does not answer: " + ret.Error()
	}
	action, ret := readRecoveryAction(d)
	switch {
	case ret == nvml.SUCCESS:
		if action == nvml.GPU_RECOVERY_ACTION_NONE {
			return true, "the GPU answers and the driver asks for no recovery action"
		}
		return false, "the driver asks for recovery action " + recoveryActionName(action)
	case wasLost:
		return true, "the lost GPU answers again"
	default:
		return false, "the driver does not report a recovery action (" + ret.Error() + ")"
	}
}

// recoveryActionName spells an nvmlDeviceGpuRecoveryAction_t.
func recoveryActionName(a nvml.DeviceGpuRecoveryAction) string {
	switch a {
	case nvml.GPU_RECOVERY_ACTION_NONE:
		return "none"
	case nvml.GPU_RECOVERY_ACTION_GPU_RESET:
		return "GPU reset"
	case nvml.GPU_RECOVERY_ACTION_NODE_REBOOT:
		return "node reboot"
	case nvml.GPU_RECOVERY_ACTION_DRAIN_P2P:
		return "drain peer-to-peer traffic"
	case nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET:
		return "drain peer-to-peer traffic and reset the GPU"
	case nvml.GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN:
		return "recover the IMEX domain"
	case nvml.GPU_RECOVERY_ACTION_BUS_RESET:
		return "PCIe bus reset"
	case nvml.GPU_RECOVERY_ACTION_SYSTEM_REBOOT:
		return "system reboot"
	default:
		return fmt.Sprintf("%d", a)
	}
}

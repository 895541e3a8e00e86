package discovery

import (
	"context"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/pkg/gpu"
)

// waitTimeoutMs bounds each EventSet.Wait, so that a cancelled context is
// noticed within it.
const waitTimeoutMs = 1000

// retryDelay spaces out retries after an unexpected Wait error.
var retryDelay = time.Second

// noInstance is the instance ID of an event that concerns a whole GPU.
const noInstance = 0xFFFFFFFF

// WatchHealth follows the NVML events of node's GPUs and sends a
// HealthEvent each time one's health (or the reason for it) changes:
// a critical XID or a double-bit ECC error makes a GPU Unhealthy; the
// XIDs an application causes are ignored. A GPU whose events NVML cannot
// deliver is logged and not watched. It returns nil when ctx is
// cancelled, and an error only when watching cannot start.
func WatchHealth(ctx context.Context, lib nvml.Interface, node gpu.Node, events chan<- gpu.HealthEvent) error {
	logger := klog.FromContext(ctx)
	set, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("create NVML event set: %w", ret)
	}
	defer func() { _ = set.Free() }()

	w := &watcher{events: events, byHandle: map[nvml.Device]string{}, last: map[string]gpu.HealthEvent{}}
	for _, g := range node.GPUs {
		if err := w.register(ctx, lib, set, g); err != nil {
			return err
		}
	}
	if len(w.byHandle) == 0 {
		logger.Info("No GPU delivers health events; health is not watched")
		<-ctx.Done()
		return nil
	}

	for {
		if ctx.Err() != nil {
			return nil
		}
		ev, ret := set.Wait(waitTimeoutMs)
		switch ret {
		case nvml.SUCCESS:
			w.handle(ctx, ev)
		case nvml.ERROR_TIMEOUT:
		case nvml.ERROR_GPU_IS_LOST:
			// NVML does not say which one; every GPU is suspect.
			for _, uuid := range w.byHandle {
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
	events chan<- gpu.HealthEvent
	// byHandle maps the registered devices to their UUIDs.
	byHandle map[nvml.Device]string
	// last is the last event sent per GPU, to send changes only.
	last map[string]gpu.HealthEvent
}

// register adds a GPU's critical events to the set.
func (w *watcher) register(ctx context.Context, lib nvml.Interface, set nvml.EventSet, g gpu.GPU) error {
	logger := klog.FromContext(ctx)
	d, ret := lib.DeviceGetHandleByUUID(g.UUID)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %d (%s): get handle: %w", g.Index, g.UUID, ret)
	}
	supported, ret := d.GetSupportedEventTypes()
	if ret != nvml.SUCCESS {
		logger.Info("Cannot ask which health events a GPU supports; not watching it", "gpu", g.Index, "uuid", g.UUID, "err", ret)
		return nil
	}
	types := supported & (nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError)
	if types&nvml.EventTypeXidCriticalError == 0 {
		logger.Info("GPU does not report XID events; not watching it", "gpu", g.Index, "uuid", g.UUID)
		return nil
	}
	switch ret := d.RegisterEvents(types, set); ret {
	case nvml.SUCCESS:
		w.byHandle[d] = g.UUID
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
		if applicationXIDs[ev.EventData] {
			logger.V(2).Info("Application XID ignored", "uuid", uuid, "xid", ev.EventData)
			return
		}
		reason = xidReason(ev.EventData)
	case nvml.EventTypeDoubleBitEccError:
		reason = "double-bit ECC error"
	default:
		return
	}
	if ev.GpuInstanceId != noInstance && ev.ComputeInstanceId != noInstance {
		reason += fmt.Sprintf(" (MIG GPU instance %d, compute instance %d)", ev.GpuInstanceId, ev.ComputeInstanceId)
	}
	w.send(ctx, gpu.HealthEvent{UUID: uuid, Health: gpu.Unhealthy, Reason: reason})
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

package plugin

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/pkg/gpu"
	"github.com/gpudra/gpudra/pkg/slicebuilder"
)

// publish builds the node's ResourceSlices from the inventory, the current
// health and how the prepared claims hold the GPUs, and hands them to the
// helper's ResourceSlice controller, which writes only what changed.
// Publishes are serialized, so the last one always built from the latest
// state.
func (d *Driver) publish(ctx context.Context) error {
	d.publishMu.Lock()
	defer d.publishMu.Unlock()
	inUse := d.state.GPUsInUse()
	d.mu.Lock()
	d.inUse = inUse
	node := d.node
	health := make(map[string]gpu.Health, len(d.health))
	for uuid, ev := range d.health {
		health[uuid] = ev.Health
	}
	admin, wholeOnly := d.admin, d.wholeGPUsOnly
	shared := d.cfg.ConsumableCapacity && !d.exclusiveGPUsOnly
	d.mu.Unlock()

	resources, err := slicebuilder.Build(node, slicebuilder.Options{
		DriverName:         d.cfg.DriverName,
		SysfsRoot:          d.cfg.Backend.SysfsRoot(),
		Health:             health,
		AdminInstances:     admin,
		InUse:              inUse,
		WholeGPUsOnly:      wholeOnly,
		MigProfiles:        d.cfg.MigProfiles,
		ConsumableCapacity: shared,
	})
	if err != nil {
		return fmt.Errorf("build ResourceSlices: %w", err)
	}
	d.rememberAttributes(resources)
	d.wantPublished(resources)
	if err := d.helper.PublishResources(ctx, resources); err != nil {
		return fmt.Errorf("publish ResourceSlices: %w", err)
	}
	klog.FromContext(ctx).V(3).Info("Published ResourceSlices", "gpus", len(node.GPUs), "unhealthy", len(health))
	return nil
}

// warnUnknownProfiles logs the chosen MIG profiles that no GPU of the node
// offers: a typo, or another model's profile, publishes nothing for it.
func warnUnknownProfiles(ctx context.Context, node gpu.Node, choice slicebuilder.MigProfiles) {
	offered := map[string]bool{}
	for _, g := range node.GPUs {
		if g.MIG == nil {
			continue
		}
		for _, p := range g.MIG.Profiles {
			offered[p.Name] = true
		}
	}
	for _, name := range choice.Only {
		if !offered[name] {
			klog.FromContext(ctx).Info("No GPU of this node has the chosen MIG profile; it publishes nothing here", "profile", name, "migProfiles", choice.String())
		}
	}
}

// republishIfInUseChanged asks for a publish when prepares or unprepares
// changed how the claims hold the GPUs: a GPU taken whole hides its MIG
// placements, one whose partitions are taken hides its whole device (one
// slice write each), and both come back when the claims are unprepared.
// The publish runs in republishLoop, not in the kubelet's call: building
// the node's slices is not what the pod waits for, and changes that come
// together (eight pods starting) share one publish.
func (d *Driver) republishIfInUseChanged() {
	inUse := d.state.GPUsInUse()
	d.mu.Lock()
	same := maps.Equal(inUse, d.inUse)
	d.mu.Unlock()
	if same {
		return
	}
	d.republishAsked.Add(1)
	select {
	case d.republish <- struct{}{}:
	default: // one is queued already; it will see this change too
	}
}

// republishLoop publishes after changes of the GPUs in use until ctx ends.
// Each publish reads the state afresh, so it covers every change asked for
// before it started.
func (d *Driver) republishLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.republish:
		}
		asked := d.republishAsked.Load()
		if err := d.publish(ctx); err != nil {
			// The claims are prepared either way: the slices only publish
			// more devices than can be allocated until the next publish.
			klog.FromContext(ctx).Error(err, "Republishing after a change of the GPUs in use")
		}
		d.republishDone.Store(asked)
	}
}

// publishPending says whether a change of the GPUs in use has not been
// handed to the ResourceSlice controller yet.
func (d *Driver) publishPending() bool {
	return d.republishDone.Load() < d.republishAsked.Load()
}

// Republish rediscovers nothing; it rebuilds the slices from the current
// inventory and health and hands them to the controller, which writes only
// differences. Tests use it to prove that steady state costs no API writes.
func (d *Driver) Republish(ctx context.Context) error { return d.publish(ctx) }

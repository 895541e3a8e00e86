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
	"fmt"
	"maps"
	"time"

	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// Publishing. The plugin builds the node's ResourceSlices (the wanted
// pool) from the inventory, the health, how the prepared claims hold the
// GPUs and which GPUs published their MIG placements before
// (slicebuilder.Plan), and hands them to the kubeletplugin helper's
// ResourceSlice controller, which writes what differs from what the API
// server holds.
//
// It hands them over one changed slice at a time (slicebuilder.NextStep),
// and the next slice only once the API server holds the previous one (the
// node's slice watch, ready.go): given two changed slices in one sync, the
// controller starts a new pool generation and rewrites every slice of the
// node, and until it is done the scheduler can place nothing on the node.
// A step the API server does not show within stepTimeout (an API server
// that is down, or that changes what it stores) is given up on, and the
// next is handed over anyway.

// stepTimeout is how long a step may take to show in the API server before
// the next one is handed over regardless.
const stepTimeout = 10 * time.Second

// sliceSteps is what the plugin handed the ResourceSlice controller and
// what it wants it to hold.
type sliceSteps struct {
	// wanted is the pool the last publish built; handed the last pool
	// given to the helper, at handedAt.
	wanted, handed *resourceslice.Pool
	handedAt       time.Time
	// stalled is set once a step was given up on, so that it is logged
	// once.
	stalled bool
}

// publish builds the node's ResourceSlices from the inventory, the current
// health and how the prepared claims hold the GPUs, and hands the
// ResourceSlice controller the next step towards them (even an unchanged
// one, which makes it compare with the API server at once). Publishes are
// serialized, so the last one always built from the latest state.
func (p *publisher) publish(ctx context.Context) error {
	p.publishMu.Lock()
	defer p.publishMu.Unlock()
	return p.publishLocked(ctx)
}

// publishLocked is publish with publishMu held.
func (p *publisher) publishLocked(ctx context.Context) error {
	if found := p.devicePlugin.resources(); found != nil {
		// Another allocator hands out the node's GPUs: none is published
		// (deviceplugin.go). The MIG placements published before stay
		// recorded, and come back with the GPUs.
		p.steps.wanted = &resourceslice.Pool{}
		if err := p.stepLocked(ctx, true); err != nil {
			return err
		}
		klog.FromContext(ctx).V(3).Info("Published no ResourceSlices: the Node advertises NVIDIA's device plugin's GPUs", "resources", found)
		return nil
	}
	inUse := p.state.GPUsInUse()
	health := p.health.gpuHealth()
	p.mu.Lock()
	p.inUse = inUse
	node := p.node
	admin, wholeOnly := p.admin, p.wholeGPUsOnly
	shared := p.cfg.ConsumableCapacity && !p.exclusiveGPUsOnly
	// What the last publish held, and what the checkpoint says was ever
	// published and may be held by claims (after a restart or a wipe of
	// the node's slices the former alone would forget it).
	migReady := maps.Clone(p.migReady)
	p.mu.Unlock()
	recorded := p.state.MigPublished()
	if migReady == nil {
		migReady = map[string]bool{}
	}
	maps.Copy(migReady, recorded)

	opts := slicebuilder.Options{
		DriverName:         p.cfg.DriverName,
		SysfsRoot:          p.cfg.Backend.SysfsRoot(),
		Health:             health,
		AdminInstances:     admin,
		InUse:              inUse,
		SpareGPUs:          p.spareGPUs(),
		MigReady:           migReady,
		WholeGPUsOnly:      wholeOnly,
		MigProfiles:        p.cfg.MigProfiles,
		ConsumableCapacity: shared,
		IMEXReady:          p.imexReady(),
	}
	plan, err := slicebuilder.Plan(node, opts)
	if err != nil {
		return fmt.Errorf("build ResourceSlices: %w", err)
	}
	if err := p.recordMigPublished(plan.MigReady, recorded, inUse); err != nil {
		// Nothing is published that the checkpoint does not record: no
		// new spares until the record can be written (retried), only
		// what was published before and what claims hold.
		klog.FromContext(ctx).Error(err, "Recording the GPUs whose MIG placements are published; no new spare is published until it is recorded", "retryAfter", migRecordRetry)
		opts.SpareGPUs = slicebuilder.FleetAssigned(0)
		if plan, err = slicebuilder.Plan(node, opts); err != nil {
			return fmt.Errorf("build ResourceSlices: %w", err)
		}
		time.AfterFunc(migRecordRetry, func() {
			if ctx.Err() == nil {
				p.askRepublish()
			}
		})
	}
	p.mu.Lock()
	p.migReady = plan.MigReady
	p.mu.Unlock()
	p.rememberAttributes(plan.Resources)
	wanted := plan.Resources.Pools[node.Name]
	p.steps.wanted = &wanted
	if err := p.stepLocked(ctx, true); err != nil {
		return err
	}
	klog.FromContext(ctx).V(3).Info("Published ResourceSlices", "gpus", len(node.GPUs), "unhealthy", len(health), "migReady", len(plan.MigReady))
	return nil
}

// migRecordRetry is how long after a failed record of the GPUs whose MIG
// placements are published the plugin tries again.
const migRecordRetry = 2 * time.Second

// recordMigPublished records in the checkpoint, before they are handed
// to the ResourceSlice controller, the GPUs whose MIG placements a
// publish holds (ready) that it does not record yet, and forgets those
// that a claim prepared on the node holds whole: the scheduler gave that
// claim the whole GPU, which the published placements' counters allow
// only while no claim holds one of them, and until the claim lets go
// no placement of the GPU can be allocated. A GPU recorded stays so
// otherwise, whatever the spares assigned and whether its placements are
// still published: a claim allocated there may not have reached the node.
func (p *publisher) recordMigPublished(ready, recorded map[string]bool, inUse map[string]gpu.Use) error {
	var add, remove []string
	for uuid := range ready {
		if !recorded[uuid] {
			add = append(add, uuid)
		}
	}
	for uuid := range recorded {
		if inUse[uuid] == gpu.UsedWhole && !ready[uuid] {
			remove = append(remove, uuid)
		}
	}
	if len(add)+len(remove) == 0 {
		return nil
	}
	return p.state.RecordMigPublished(add, remove)
}

// step hands the controller the next step, if the API server holds the
// last one (or it timed out).
func (p *publisher) step(ctx context.Context) error {
	p.publishMu.Lock()
	defer p.publishMu.Unlock()
	return p.stepLocked(ctx, false)
}

// stepLocked is step with publishMu held; always hands the next pool over
// even where nothing changed.
func (p *publisher) stepLocked(ctx context.Context, always bool) error {
	s := &p.steps
	if s.wanted == nil {
		return nil
	}
	base := s.handed
	if base == nil {
		// The first publish of this process: the controller starts from
		// what the API server holds (a restarted plugin's slices), and so
		// do the steps.
		base = p.slices.storedPool()
	} else if p.sameAsStored(*base) != nil {
		if time.Since(s.handedAt) < stepTimeout {
			// The controller is still writing the last step. A publish
			// hands it the same again, which makes it compare with the
			// API server at once (a slice someone deleted).
			if always {
				return p.handOver(ctx, *s.handed)
			}
			return nil
		}
		if !s.stalled {
			s.stalled = true
			klog.FromContext(ctx).Info("The API server does not show the last ResourceSlice change yet; handing over the next one regardless", "after", stepTimeout)
		}
	}
	next, done := slicebuilder.NextStep(base, *s.wanted)
	if done && s.handed != nil && !always {
		return nil
	}
	s.handed, s.handedAt, s.stalled = &next, time.Now(), false
	return p.handOver(ctx, next)
}

// handOver gives the pool to the helper's ResourceSlice controller.
func (p *publisher) handOver(ctx context.Context, pool resourceslice.Pool) error {
	if err := p.helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{p.cfg.NodeName: pool}}); err != nil {
		return fmt.Errorf("publish ResourceSlices: %w", err)
	}
	return nil
}

// stepLoop hands the controller the next step whenever the node's slices
// change in the API server, until ctx ends; a step that does not show is
// retried after stepTimeout. (A select, not a wait loop: it wakes on a
// change as well as the time.)
func (p *publisher) stepLoop(ctx context.Context) {
	timer := time.NewTimer(stepTimeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
		if err := p.step(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Publishing the next ResourceSlice change")
		}
		timer.Reset(stepTimeout)
	}
}

// wakeStepper asks stepLoop to look again.
func (p *publisher) wakeStepper() {
	select {
	case p.wake <- struct{}{}:
	default: // one is queued already
	}
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
// placements, a spare partitioned makes another GPU a spare (one slice
// write each). The publish runs in republishLoop, not in the kubelet's
// call: building the node's slices is not what the pod waits for, and
// changes that come together (eight pods starting) share one publish.
func (p *publisher) republishIfInUseChanged() {
	inUse := p.state.GPUsInUse()
	p.mu.Lock()
	same := maps.Equal(inUse, p.inUse)
	p.mu.Unlock()
	if same {
		return
	}
	p.askRepublish()
}

// askRepublish asks republishLoop for a publish.
func (p *publisher) askRepublish() {
	p.republishAsked.Add(1)
	select {
	case p.republish <- struct{}{}:
	default: // one is queued already; it will see this change too
	}
}

// republishLoop publishes after changes of the GPUs in use, or of the
// spares gpudra-controller assigned the node, until ctx ends.
// Each publish reads the state afresh, so it covers every change asked for
// before it started.
func (p *publisher) republishLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.republish:
		}
		// After the kubelet's calls in flight: their pods wait for them,
		// not for the slices (callgate.go). What they change meanwhile
		// is in this publish.
		p.calls.yield(ctx)
		asked := p.republishAsked.Load()
		if err := p.publish(ctx); err != nil {
			// The claims are prepared either way: the slices only publish
			// more devices than can be allocated until the next publish.
			klog.FromContext(ctx).Error(err, "Republishing after a change of the GPUs in use or of the spares assigned")
		}
		p.republishDone.Store(asked)
	}
}

// publishPending says whether a change of the GPUs in use (or of the
// spares assigned) has not been handed to the ResourceSlice controller yet.
func (p *publisher) publishPending() bool {
	return p.republishDone.Load() < p.republishAsked.Load()
}

// Republish rediscovers nothing; it rebuilds the slices from the current
// inventory and health and hands them to the controller, which writes only
// differences. Tests use it to prove that steady state costs no API writes.
func (d *Driver) Republish(ctx context.Context) error { return d.pub.publish(ctx) }

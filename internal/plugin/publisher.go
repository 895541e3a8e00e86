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
	"sync"
	"sync/atomic"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/imexready"
	"github.com/gpudra/gpudra/internal/nodestate"
)

// publisher owns the node's ResourceSlices: everything a publish reads
// that no other part of the plugin owns (the inventory and its NVLink
// domain, the MIG instances gpudra did not create, what the cluster
// serves, how the claims held the GPUs and which GPUs published their
// MIG placements at the last publish, the device plugin check, the
// spares assigned), the steps it hands the ResourceSlice controller
// (publish.go), and the republishes that changes ask for. What it reads
// from others it asks them for: the health (healthTracker), the node
// state, the IMEX daemon's answer.
type publisher struct {
	// cfg is the driver's.
	cfg Config
	// state, helper and events are set by Start before the first
	// publish and before any loop starts; only read after. health and
	// calls are the driver's, imex is nil with --imex-daemon=none and
	// guards its own answer (imex.go).
	state  *nodestate.State
	helper *kubeletplugin.Helper
	events *nodeEvents
	health *healthTracker
	calls  *callGate
	imex   *imexready.Prober

	// mu guards node, domain, admin, wholeGPUsOnly, exclusiveGPUsOnly,
	// disabledFeatures, inUse, migReady and attributes.
	// It is never held while the publisher calls out (the node state, the
	// helper, the API server): the node state calls in holding its own
	// lock (consumableCapacityActive, nvlinkDomain), so the order is the
	// node state's lock, then mu.
	mu   sync.Mutex
	node gpu.Node
	// domain is the node's NVLink domain as node's fabric readings decide
	// it (gpu.Node.NVLinkDomain), kept to tell when it changes.
	domain gpu.NVLinkDomain
	// admin are the MIG instances gpudra did not create, by GPU UUID: their
	// placements and GPUs are not published.
	admin map[string][]gpu.MigInstance
	// wholeGPUsOnly is set once the API server dropped the partitionable
	// fields: from then on only whole GPUs are published.
	wholeGPUsOnly bool
	// exclusiveGPUsOnly is set once the API server dropped the consumable
	// capacity fields: from then on whole GPUs are not shared.
	exclusiveGPUsOnly bool
	// disabledFeatures are the features whose fields the API server
	// dropped from the published slices: it holds the slices without them.
	disabledFeatures map[string]bool
	// inUse is how the prepared claims held the GPUs at the last publish.
	inUse map[string]gpu.Use
	// migReady are the GPUs whose MIG placements the last publish built
	// (slicebuilder.Publication.MigReady), by UUID.
	migReady map[string]bool
	// attributes are the published devices' attributes, by device name:
	// what the device metadata of a prepared device repeats.
	attributes map[string]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute

	// publishMu serializes publishes and steps, and guards steps.
	publishMu sync.Mutex
	steps     sliceSteps
	// wake asks stepLoop to look again (a slice changed in the API
	// server, or a step timed out); the slice watch's handlers write it.
	wake chan struct{}
	// slices watches the node's slices in the API server; it guards
	// its own store (slicewatch.go).
	slices sliceWatch
	// devicePlugin checks the Node for NVIDIA's device plugin's GPUs
	// (deviceplugin.go); while it finds any, no GPU is published. It
	// guards its own answer.
	devicePlugin devicePluginCheck
	// fleet is what gpudra-controller assigned the node in fleet mode;
	// it guards its own fields (spares.go).
	fleet fleetSpares

	// republish wakes republishLoop: askRepublish writes it, from the
	// kubelet's calls, the spares watch, the fabric, IMEX and device
	// plugin checks. republishAsked counts the changes asked to be
	// published (askRepublish adds), republishDone those covered by a
	// finished publish (republishLoop stores).
	republish      chan struct{}
	republishAsked atomic.Int64
	republishDone  atomic.Int64
}

// newPublisher is the publisher of the node as discovered, with the IMEX
// daemon's prober of cfg's mode.
func newPublisher(cfg Config, node gpu.Node, health *healthTracker, calls *callGate) *publisher {
	p := &publisher{
		cfg:       cfg,
		health:    health,
		calls:     calls,
		node:      node,
		domain:    node.NVLinkDomain(),
		imex:      newIMEXProber(cfg),
		wake:      make(chan struct{}, 1),
		republish: make(chan struct{}, 1),
	}
	p.slices.cfg = cfg
	p.devicePlugin.cfg, p.devicePlugin.republish = cfg, p.askRepublish
	p.fleet.cfg, p.fleet.republish = cfg, p.askRepublish
	return p
}

// currentNode is the inventory the plugin publishes.
func (p *publisher) currentNode() gpu.Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.node
}

// adminInstances are the MIG instances found at start-up that gpudra did
// not create, by GPU UUID.
func (p *publisher) adminInstances() map[string][]gpu.MigInstance {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.admin
}

// setAdminInstances keeps the MIG instances found at start-up that
// gpudra did not create: the node state's reconcile finds them, after the
// publisher was made.
func (p *publisher) setAdminInstances(admin map[string][]gpu.MigInstance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.admin = admin
}

// setMigReady keeps the GPUs whose MIG placements an earlier run
// published, for the first publish.
func (p *publisher) setMigReady(ready map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.migReady = ready
}

// wholeOnly reports whether publishing fell back to whole GPUs only.
func (p *publisher) wholeOnly() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wholeGPUsOnly
}

// fallBackToWholeGPUs switches publishing to whole GPUs only and reports
// whether it was not so already.
func (p *publisher) fallBackToWholeGPUs() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wholeGPUsOnly {
		return false
	}
	p.wholeGPUsOnly = true
	return true
}

// fallBackToExclusiveGPUs stops sharing whole GPUs through consumable
// capacity, says so in the log and in an Event on the Node, and reports
// whether it was not so already.
func (p *publisher) fallBackToExclusiveGPUs(ctx context.Context) bool {
	p.mu.Lock()
	if p.exclusiveGPUsOnly {
		p.mu.Unlock()
		return false
	}
	p.exclusiveGPUsOnly = true
	p.mu.Unlock()
	msg := "The cluster does not serve consumable capacity (allowMultipleAllocations was dropped): publishing exclusive GPUs, one claim each. " +
		"Enable the DRAConsumableCapacity feature on the API server and scheduler (beta, on by default since Kubernetes 1.36), then restart the plugin, to share GPUs."
	klog.FromContext(ctx).Info(msg)
	p.events.warn(ReasonConsumableCapacityUnavailable, msg)
	return true
}

// consumableCapacityActive reports whether whole GPUs are published as
// shareable: asked for, and served by the cluster.
func (p *publisher) consumableCapacityActive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.ConsumableCapacity && !p.exclusiveGPUsOnly
}

// disableFeatures records features whose fields the API server dropped:
// the slices it holds are compared without them.
func (p *publisher) disableFeatures(features []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.disabledFeatures == nil {
		p.disabledFeatures = map[string]bool{}
	}
	for _, f := range features {
		p.disabledFeatures[f] = true
	}
}

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
	"reflect"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/gpu"
)

// The NVLink fabric. On a GB200/GB300 tray the fabric manager changes what
// the GPUs report while the node runs: the probe finishes after the
// plugin started, NMX moves the tray to another clique, the fabric turns
// unhealthy. The plugin reads the fabric again every
// FabricRefreshInterval and republishes when a GPU's reading changed (the
// domain attributes follow gpu.Node.NVLinkDomain). A fabric node that is
// not in a domain says why in an Event on the Node and in
// MetricNVLinkDomainUnavailable; its GPUs stay published, without the
// domain, for single-node jobs.

// fabricRefreshInterval is FabricRefreshInterval's default: a tray that
// finishes its probe is in its domain this long after at most.
const fabricRefreshInterval = 10 * time.Second

// ReasonNVLinkDomainUnavailable: the node's GPUs are in a multi-node
// NVLink fabric, but the node is in no NVLink domain.
const ReasonNVLinkDomainUnavailable = "NVLinkDomainUnavailable"

// currentDomain is the node's NVLink domain as last read.
func (p *publisher) currentDomain() gpu.NVLinkDomain {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.domain
}

// watchFabric refreshes the fabric until ctx ends.
func (p *publisher) watchFabric(ctx context.Context) {
	wait.UntilWithContext(ctx, p.refreshFabric, p.cfg.FabricRefreshInterval)
}

// refreshFabric reads the GPUs' fabric and platform again; when a reading
// changed it keeps it and republishes, and when the domain changed it
// reports it.
func (p *publisher) refreshFabric(ctx context.Context) {
	p.mu.Lock()
	node := p.node
	p.mu.Unlock()
	fresh := p.cfg.Backend.RefreshFabric(ctx, node)
	if reflect.DeepEqual(fabricReadings(fresh), fabricReadings(node)) {
		return
	}
	domain := fresh.NVLinkDomain()
	p.mu.Lock()
	// Only the fabric and platform of the node's GPUs are replaced: the
	// rest of p.node is the discovery's, which nothing else changes. The
	// GPUs go into a new slice: copies of p.node taken under the lock
	// (publishing, telemetry) share the old one and read it unlocked.
	gpus := slices.Clone(p.node.GPUs)
	for i := range gpus {
		if i < len(fresh.GPUs) && gpus[i].UUID == fresh.GPUs[i].UUID {
			gpus[i].Fabric, gpus[i].Platform = fresh.GPUs[i].Fabric, fresh.GPUs[i].Platform
		}
	}
	p.node.GPUs = gpus
	old := p.domain
	p.domain = domain
	p.mu.Unlock()
	if domain != old {
		klog.FromContext(ctx).Info("NVLink domain changed", "from", old.Name, "to", domain.Name, "reason", domain.Message)
		p.reportDomain(ctx, domain)
	}
	p.askRepublish()
}

// fabricReading is what of a GPU the fabric refresh follows.
type fabricReading struct {
	Fabric   gpu.Fabric
	Platform gpu.Platform
}

// fabricReadings lists the readings of the GPUs that have a fabric; nil
// when none has.
func fabricReadings(n gpu.Node) []fabricReading {
	var out []fabricReading
	has := false
	for _, g := range n.GPUs {
		out = append(out, fabricReading{g.Fabric, g.Platform})
		has = has || (g.Fabric.State != gpu.FabricNotSupported && g.Fabric.State != "")
	}
	if !has {
		return nil
	}
	return out
}

// reportDomain says, in an Event on the Node, why a fabric node is in no
// NVLink domain; the metric reads the domain at each scrape.
func (p *publisher) reportDomain(ctx context.Context, domain gpu.NVLinkDomain) {
	if !domain.Fabric || domain.InDomain() {
		return
	}
	msg := "The GPUs are in a multi-node NVLink fabric, but the node is in no NVLink domain: " + domain.Message +
		". Its GPUs are published without nvlinkDomain (single-node work only) until every GPU reports the fabric COMPLETED, successful and not UNHEALTHY, in one clique."
	klog.FromContext(ctx).Info(msg)
	if p.events != nil {
		p.events.warn(ReasonNVLinkDomainUnavailable, msg)
	}
}

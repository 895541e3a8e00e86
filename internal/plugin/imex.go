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

	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/imexready"
	"github.com/gpudra/gpudra/internal/nodestate"
)

// The IMEX daemon (docs/nvlink.md#imex-daemons). A channel of the node's
// NVLink domain works only while the node's IMEX daemon runs and is a
// member of the domain. With --imex-daemon=host the operator runs the
// daemon (NVIDIA's nvidia-imex service) and the plugin asks it, with
// nvidia-imex-ctl -q, every IMEXCheckInterval while the node is in a
// domain: it publishes the answer as imexReady on its GPUs, from which
// gpudra-controller sets the readiness label the channel pools select on,
// so new pods that hold a channel stay off a node whose daemon stopped
// answering, and its GPUs stay usable for single-node work. A prepare of
// a channel reads the last answer and fails while it is not READY (the
// kubelet retries). With --imex-daemon=none the plugin asks nothing and
// publishes no imexReady: the admin vouches for the daemons.

// IMEX daemon modes (Config.IMEXDaemon, --imex-daemon).
const (
	IMEXDaemonHost = "host"
	IMEXDaemonNone = "none"
)

// ReasonIMEXDaemonNotReady: the node is in an NVLink domain and its IMEX
// daemon does not answer READY.
const ReasonIMEXDaemonNotReady = "IMEXDaemonNotReady"

// ValidateIMEXDaemon checks an --imex-daemon value.
func ValidateIMEXDaemon(mode string) error {
	switch mode {
	case IMEXDaemonHost, IMEXDaemonNone:
		return nil
	}
	return fmt.Errorf("IMEX daemon mode %q: want %q (ask the node's nvidia-imex service with nvidia-imex-ctl -q) or %q (ask nothing)", mode, IMEXDaemonHost, IMEXDaemonNone)
}

// newIMEXProber is the prober of Config's mode, nil for none.
func newIMEXProber(cfg Config) *imexready.Prober {
	if cfg.IMEXDaemon != IMEXDaemonHost {
		return nil
	}
	socket := cfg.IMEXSocket
	if socket == "" {
		socket = imexready.DefaultSocket
	}
	return &imexready.Prober{Ctl: cfg.Backend.IMEXCtl(), Socket: socket, Interval: cfg.IMEXCheckInterval, Timeout: cfg.IMEXQueryTimeout}
}

// imexReadiness is what a prepare of a channel asks: the daemon's last
// answer, or every domain ready when the plugin asks nothing.
func (p *publisher) imexReadiness() nodestate.IMEXReadiness {
	if p.imex == nil {
		return nodestate.AlwaysReady{}
	}
	return p.imex
}

// inDomain says whether the node is in an NVLink domain now: only there
// is a daemon expected, and asked.
func (p *publisher) inDomain() bool { return p.currentDomain().InDomain() }

// imexReady is what the next publish says of the daemon (slicebuilder's
// Options.IMEXReady): nil when the plugin does not ask; not ready until
// the daemon answered READY.
func (p *publisher) imexReady() *bool {
	if p.imex == nil {
		return nil
	}
	_, err := p.imex.Last()
	ready := err == nil
	return &ready
}

// probeIMEXOnce asks the daemon before the first publish, so that a
// plugin restart publishes what the daemon says, not a passing "not
// ready" that would take the node out of its domain's pool for a moment.
func (p *publisher) probeIMEXOnce(ctx context.Context) {
	if p.imex == nil || !p.inDomain() {
		return
	}
	if err := p.imex.Probe(ctx); err != nil {
		klog.FromContext(ctx).Info("IMEX daemon not ready at start", "err", err)
	}
}

// watchIMEX asks the daemon until ctx ends, republishing when its
// readiness flips and saying why in an Event on the Node when it is not
// ready.
func (p *publisher) watchIMEX(ctx context.Context) {
	if p.imex == nil {
		return
	}
	p.imex.Run(ctx, p.inDomain, func(ready bool, err error) {
		if !ready && p.events != nil {
			p.events.warn(ReasonIMEXDaemonNotReady, fmt.Sprintf("The node is in NVLink domain %s, but its IMEX daemon is not ready: %v. New pods that hold an IMEX channel stay off this node until it answers READY; its GPUs stay usable for single-node work.", p.currentDomain().Name, err))
		}
		p.askRepublish()
	})
}

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

package nodestate

import (
	"context"
	"fmt"
	"strconv"

	"github.com/gpudra/gpudra/internal/gpu"
)

// The environment a container with an IMEX channel gets, so that a job
// (and a test pod) can tell which domain and channel it was given.
const (
	EnvNVLinkDomain = "GPUDRA_NVLINK_DOMAIN"
	EnvIMEXChannel  = "GPUDRA_IMEX_CHANNEL"
)

// ChannelDevices gives a container an IMEX channel of the node's NVLink
// domain (docs/nvlink.md): its character device, with the major the
// driver registered on this node.
type ChannelDevices interface {
	IMEXChannelEdits(ch gpu.IMEXChannel) (gpu.Edits, error)
}

// IMEXReadiness says whether the node's IMEX daemon can serve a job's
// channel in a domain. A prepare asks before it records anything: a
// daemon that is not ready fails the prepare, and the kubelet retries.
type IMEXReadiness interface {
	Ready(ctx context.Context, domain string) error
}

// AlwaysReady is the IMEXReadiness of a node whose IMEX daemon gpudra
// does not check (--imex-daemon=none): every domain is ready. The plugin
// otherwise uses imexready.Prober.
type AlwaysReady struct{}

// Ready implements IMEXReadiness.
func (AlwaysReady) Ready(context.Context, string) error { return nil }

// channelEdits is what a container needs for an IMEX channel: its device
// node and the domain and channel in the environment.
func (s *State) channelEdits(ch gpu.IMEXChannel) (gpu.Edits, error) {
	if s.opts.Channels == nil {
		return gpu.Edits{}, fmt.Errorf("IMEX channel %d of NVLink domain %s: this plugin gives no IMEX channels", ch.Number, ch.Domain)
	}
	edits, err := s.opts.Channels.IMEXChannelEdits(ch)
	if err != nil {
		return gpu.Edits{}, fmt.Errorf("IMEX channel %d of NVLink domain %s: %w", ch.Number, ch.Domain, err)
	}
	return edits.Append(gpu.Edits{Env: []string{
		EnvNVLinkDomain + "=" + ch.Domain,
		EnvIMEXChannel + "=" + strconv.Itoa(ch.Number),
	}}), nil
}

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

package backend

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpudra/gpudra/internal/discovery"
	"github.com/gpudra/gpudra/internal/gpu"
)

// library is what both backends share: an initialized nvml.Interface and
// the one discovery code path over it.
type library struct {
	lib      nvml.Interface
	nodeName string
}

// initLibrary initializes lib; what fails is reported with what was
// being opened.
func initLibrary(lib nvml.Interface, nodeName, what string) (library, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return library{}, fmt.Errorf("initialize NVML (%s): %w", what, ret)
	}
	return library{lib: lib, nodeName: nodeName}, nil
}

// Discover enumerates the node's GPUs, in index order.
func (l library) Discover(ctx context.Context) (gpu.Node, error) {
	return discovery.Discover(ctx, l.lib, l.nodeName)
}

// RefreshFabric returns node with its GPUs' NVLink fabric and platform
// readings refreshed (discovery.RefreshFabric).
func (l library) RefreshFabric(ctx context.Context, node gpu.Node) gpu.Node {
	return discovery.RefreshFabric(ctx, l.lib, node)
}

// HealthOptions tune WatchHealth: which XIDs are informational, how often
// an unhealthy GPU is asked whether it recovered.
type HealthOptions = discovery.HealthOptions

// WatchHealth sends a HealthEvent each time the health of one of node's
// GPUs changes (XID errors, a GPU lost, recovery) until ctx is done. It
// returns nil when ctx is cancelled. The node is the one the plugin
// publishes, not a new discovery: a GPU that fell off the bus since must
// still be watched (and reported unhealthy), not dropped.
func (l library) WatchHealth(ctx context.Context, node gpu.Node, opts HealthOptions, events chan<- gpu.HealthEvent) error {
	return discovery.WatchHealth(ctx, l.lib, node, opts, events)
}

// CurrentHealth reports the GPUs of node that are not fit now, without
// waiting for an event: what an XID from before the plugin started still
// asks for (a GPU reset, a reboot), or a GPU that no longer answers.
func (l library) CurrentHealth(node gpu.Node) []gpu.HealthEvent {
	return discovery.CurrentHealth(l.lib, node)
}

// Close releases NVML (Backend.Close, once).
func (l library) Close() error {
	if ret := l.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("shut down NVML: %w", ret)
	}
	return nil
}

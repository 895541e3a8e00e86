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
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// Another allocator of the node's GPUs. NVIDIA's device plugin (run by the
// GPU Operator on every GPU node unless told otherwise) hands out the same
// GPUs through the extended resource nvidia.com/gpu (nvidia.com/mig-<profile>
// with its mixed MIG strategy, nvidia.com/gpu.shared when it time-slices):
// with both running, the scheduler gives one GPU to a device-plugin pod and
// to a DRA claim, and neither allocator knows. The kubelet writes those
// resources into its Node's status.capacity and allocatable when the device
// plugin registers, and that is what the scheduler acts on; the plugin reads
// its Node (it has nodes get already, for its slices' owner) at start-up
// and every DevicePluginCheckInterval, and while the Node shows any of them
// it publishes none of the node's GPUs: the Node's count does not say which
// GPUs the device plugin hands out, and a GPU published by both is one that
// two pods get. It says so in the log and a Warning Event on the Node (with
// how to turn the device plugin off) and in MetricDevicePluginConflict, and
// publishes the GPUs again once the resources are gone (or 0: the kubelet
// zeroes them after the device plugin has stopped). Claims prepared before
// keep their devices; only new allocations stop. docs/gpu-operator.md says
// why a socket under the kubelet's device-plugins directory is not asked.

// DefaultDevicePluginCheckInterval is how often the plugin reads its Node
// for another allocator's GPUs.
const DefaultDevicePluginCheckInterval = 30 * time.Second

// Event reasons of the device plugin check.
const (
	// ReasonDevicePluginConflict: the Node shows NVIDIA's device plugin's
	// resources; the plugin publishes none of its GPUs.
	ReasonDevicePluginConflict = "GPUsAdvertisedByDevicePlugin"
	// ReasonDevicePluginGone: they are gone; the GPUs are published again.
	ReasonDevicePluginGone = "GPUsPublishedAgain"
)

// devicePluginResource says whether an extended resource is one NVIDIA's
// device plugin advertises GPUs or MIG devices as: nvidia.com/gpu, the
// renamed shared resources nvidia.com/gpu.<suffix> (time-slicing and MPS
// with renameByDefault), and nvidia.com/mig-<profile> (MIG strategy mixed).
func devicePluginResource(name v1.ResourceName) bool {
	rest, ok := strings.CutPrefix(string(name), "nvidia.com/")
	return ok && (rest == "gpu" || strings.HasPrefix(rest, "gpu.") || strings.HasPrefix(rest, "mig-"))
}

// DevicePluginResources lists the device plugin's resources the Node
// advertises, as name=quantity sorted by name: those with a quantity above
// 0 in status.capacity or status.allocatable (capacity stays while
// unhealthy devices leave allocatable, and pods may still hold them).
func DevicePluginResources(node *v1.Node) []string {
	seen := map[v1.ResourceName]string{}
	for _, list := range []v1.ResourceList{node.Status.Allocatable, node.Status.Capacity} {
		for name, q := range list {
			if devicePluginResource(name) && q.Sign() > 0 {
				seen[name] = q.String()
			}
		}
	}
	out := make([]string, 0, len(seen))
	for name, q := range seen {
		out = append(out, string(name)+"="+q)
	}
	slices.Sort(out)
	return out
}

// devicePluginCheck owns the check of the Node for NVIDIA's device
// plugin's resources, and its last answer.
type devicePluginCheck struct {
	// cfg is the driver's; events records Events on the Node; republish
	// asks the publisher for a publish. All are set before the first
	// check; only read after.
	cfg       Config
	events    *nodeEvents
	republish func()

	// mu guards found.
	mu sync.Mutex
	// found is which of NVIDIA's device plugin's resources the Node
	// advertised at the last check; while there are any, no GPU is
	// published.
	found []string
}

// resources is what the last check found (nil: none); the GPUs are not
// published while it is not empty.
func (c *devicePluginCheck) resources() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.found
}

// watch checks the Node every DevicePluginCheckInterval until
// ctx ends, and republishes when the answer changed.
func (c *devicePluginCheck) watch(ctx context.Context) {
	if c.cfg.IgnoreDevicePlugin {
		return
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if c.check(ctx) {
			c.republish()
		}
	}, c.cfg.DevicePluginCheckInterval)
}

// check reads the Node, keeps which device plugin resources it
// advertises, reports a change (log, Event) and says whether there was
// one. A Node that cannot be read leaves the last answer: at start-up,
// none (the kubelet plugin helper needs the Node too, and its errors say
// why).
func (c *devicePluginCheck) check(ctx context.Context) bool {
	if c.cfg.IgnoreDevicePlugin {
		return false
	}
	logger := klog.FromContext(ctx)
	// ResourceVersion 0: from the API server's cache, not a quorum read
	// of etcd, since every node asks.
	node, err := c.cfg.KubeClient.CoreV1().Nodes().Get(ctx, c.cfg.NodeName, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		if ctx.Err() == nil {
			logger.Error(err, "Reading the Node to tell whether NVIDIA's device plugin advertises its GPUs; keeping the last answer", "node", c.cfg.NodeName, "retryAfter", c.cfg.DevicePluginCheckInterval)
		}
		return false
	}
	found := DevicePluginResources(node)
	c.mu.Lock()
	old := c.found
	if len(found) == 0 {
		found = nil
	}
	c.found = found
	c.mu.Unlock()
	if slices.Equal(old, found) {
		return false
	}
	if found != nil {
		msg := fmt.Sprintf("Another allocator advertises this node's GPUs (Node status %s, NVIDIA's device plugin): gpudra publishes none of the node's GPUs, so that no GPU is given to two pods. "+
			"Turn the device plugin off on this node: with the GPU Operator, label the node nvidia.com/gpu.deploy.device-plugin=false, or set devicePlugin.enabled=false for the whole cluster (docs/gpu-operator.md). "+
			"gpudra publishes the GPUs again once the Node no longer advertises them (the kubelet zeroes them some minutes after the device plugin stopped; drain the pods that hold them first).",
			strings.Join(found, ", "))
		logger.Info(msg, "node", c.cfg.NodeName, "resources", found)
		c.events.warn(ReasonDevicePluginConflict, msg)
	} else {
		msg := "The Node no longer advertises NVIDIA's device plugin's GPUs: gpudra publishes the node's GPUs again."
		logger.Info(msg, "node", c.cfg.NodeName, "before", old)
		c.events.normal(ReasonDevicePluginGone, msg)
	}
	return true
}

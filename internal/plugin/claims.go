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
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/nodestate"
)

// PrepareResourceClaims prepares each claim independently: one claim's bad
// config does not fail the others of the same pod call.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	defer d.calls.enter()()
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		start := time.Now()
		devices, err := d.state.Prepare(ctx, claim)
		d.metrics.observe(opPrepare, start, err)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Prepare failed", "claim", klog.KObj(claim))
			result[claim.UID] = kubeletplugin.PrepareResult{Err: bounded(err)}
			continue
		}
		out := make([]kubeletplugin.Device, 0, len(devices))
		for _, dev := range devices {
			kd := kubeletplugin.Device{
				Requests:     dev.Requests,
				PoolName:     dev.Pool,
				DeviceName:   dev.Device,
				CDIDeviceIDs: dev.CDIDeviceIDs,
			}
			if d.cfg.DeviceMetadata {
				kd.Metadata = d.pub.deviceMetadata(dev)
			}
			out = append(out, kd)
		}
		d.telemetry.rememberPods(claim)
		if rec, ok := d.state.Claim(string(claim.UID)); ok {
			d.status.prepared(rec, d.Node())
		}
		result[claim.UID] = kubeletplugin.PrepareResult{Devices: out}
	}
	d.pub.republishIfInUseChanged()
	return result, nil
}

// UnprepareResourceClaims undoes PrepareResourceClaims; claims this node
// never prepared succeed.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	defer d.calls.enter()()
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		ref := nodestate.ClaimRef{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}
		start := time.Now()
		err := d.state.Unprepare(ctx, ref)
		d.metrics.observe(opUnprepare, start, err)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Unprepare failed", "claim", klog.KRef(claim.Namespace, claim.Name))
			result[claim.UID] = bounded(err)
		} else {
			result[claim.UID] = nil
			d.status.unprepared(types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}, claim.UID)
		}
	}
	d.pub.republishIfInUseChanged()
	return result, nil
}

// maxClaimErrorBytes bounds the message of one claim's error in a response
// to the kubelet. Validation already summarizes what it finds
// (internal/errorlist); this is the backstop that keeps any error, present or
// future, from pushing a pod's response past the 4 MiB gRPC limit, where
// the kubelet would get ResourceExhausted and lose every claim's message:
// 128 claims of 16 KiB each are 2 MiB.
const maxClaimErrorBytes = 16 << 10

// bounded returns err, or, if its message is longer than
// maxClaimErrorBytes, an error with the start of the message that still
// wraps err (the full message is in the plugin's log).
func bounded(err error) error {
	msg := err.Error()
	if len(msg) <= maxClaimErrorBytes {
		return err
	}
	return &truncatedError{msg: fmt.Sprintf("%s... (%d bytes more; the plugin's log has the whole message)",
		strings.ToValidUTF8(msg[:maxClaimErrorBytes], ""), len(msg)-maxClaimErrorBytes), err: err}
}

type truncatedError struct {
	msg string
	err error
}

func (e *truncatedError) Error() string { return e.msg }
func (e *truncatedError) Unwrap() error { return e.err }

package plugin

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/pkg/nodestate"
)

// PrepareResourceClaims prepares each claim independently: one claim's bad
// config does not fail the others of the same pod call.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, err := d.state.Prepare(ctx, claim)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Prepare failed", "claim", klog.KObj(claim))
			result[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		out := make([]kubeletplugin.Device, 0, len(devices))
		for _, dev := range devices {
			out = append(out, kubeletplugin.Device{
				Requests:     dev.Requests,
				PoolName:     dev.Pool,
				DeviceName:   dev.Device,
				CDIDeviceIDs: dev.CDIDeviceIDs,
			})
		}
		result[claim.UID] = kubeletplugin.PrepareResult{Devices: out}
	}
	return result, nil
}

// UnprepareResourceClaims undoes PrepareResourceClaims; claims this node
// never prepared succeed.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		ref := nodestate.ClaimRef{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}
		result[claim.UID] = d.state.Unprepare(ctx, ref)
	}
	return result, nil
}

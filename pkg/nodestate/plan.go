package nodestate

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
	"github.com/gpudra/gpudra/pkg/gpu"
)

// plannedDevice is one allocated device of this driver, resolved against the
// inventory, with the config that applies to it.
type plannedDevice struct {
	result resourceapi.DeviceRequestAllocationResult
	gpu    gpu.GPU
	config configapi.Config
}

// plan resolves a claim's allocation into devices of this node and decodes
// the opaque configs that apply to them. It has no side effects, so a claim
// with a bad config or a device this node does not have fails before
// anything is recorded or created.
func (s *State) plan(ref ClaimRef, claim *resourceapi.ResourceClaim) ([]plannedDevice, error) {
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("%s is not allocated", ref)
	}
	alloc := claim.Status.Allocation.Devices
	node := s.node()
	var planned []plannedDevice
	for _, result := range alloc.Results {
		if result.Driver != s.opts.DriverName {
			continue
		}
		if result.Pool != node.Name {
			return nil, fmt.Errorf("%s: request %q: device %s is in pool %q, but this node's pool is %q", ref, result.Request, result.Device, result.Pool, node.Name)
		}
		g, ok := node.GPUByDeviceName(result.Device)
		if !ok {
			return nil, fmt.Errorf("%s: request %q: device %q is not a GPU on node %s (it may have been removed since the claim was allocated)", ref, result.Request, result.Device, node.Name)
		}
		cfg, err := s.configFor(ref, claim, result)
		if err != nil {
			return nil, err
		}
		planned = append(planned, plannedDevice{result: result, gpu: g, config: cfg})
	}
	return planned, nil
}

// configFor decodes (strictly, with defaults, validated) every opaque config of this driver that
// applies to the result, and returns the effective one: configs from the
// claim override configs from the DeviceClass, and later entries override
// earlier ones. The allocation lists class configs before claim configs, so
// the last applicable entry wins.
func (s *State) configFor(ref ClaimRef, claim *resourceapi.ResourceClaim, result resourceapi.DeviceRequestAllocationResult) (configapi.Config, error) {
	all := claim.Status.Allocation.Devices.Config
	var effective configapi.Config
	for _, c := range resourceclaim.ConfigForResult(all, result) {
		if c.Opaque == nil || c.Opaque.Driver != s.opts.DriverName {
			continue
		}
		where := configLocation(claim, c)
		cfg, err := configapi.Decode(c.Opaque.Parameters.Raw)
		if err != nil {
			return nil, fmt.Errorf("%s: request %q: %s: %w", ref, result.Request, where, err)
		}
		effective = cfg
	}
	if effective == nil {
		effective = configapi.NewGpuConfig()
	}
	if _, ok := effective.(*configapi.GpuConfig); !ok {
		return nil, fmt.Errorf("%s: request %q: device %s is a whole GPU, but the config that applies to it is a %s; use kind GpuConfig for whole GPUs",
			ref, result.Request, result.Device, effective.GetObjectKind().GroupVersionKind().Kind)
	}
	return effective, nil
}

// configLocation says where a config came from, in the words a user would
// look for it: the claim's spec.devices.config[i], or the DeviceClass.
func configLocation(claim *resourceapi.ResourceClaim, c resourceapi.DeviceAllocationConfiguration) string {
	if c.Source == resourceapi.AllocationConfigSourceClass {
		return "config from the DeviceClass"
	}
	for i, sc := range claim.Spec.Devices.Config {
		if sc.Opaque != nil && c.Opaque != nil && sc.Opaque.Driver == c.Opaque.Driver &&
			string(sc.Opaque.Parameters.Raw) == string(c.Opaque.Parameters.Raw) && slices.Equal(sc.Requests, c.Requests) {
			return fmt.Sprintf("spec.devices.config[%d].opaque.parameters", i)
		}
	}
	return "config from the claim"
}

// requestEnv returns, per request, the environment every device of that
// request carries: NVIDIA_VISIBLE_DEVICES lists all GPUs of the request, so
// that a container that references the request sees all of them, whichever
// device's edits the runtime applies last.
func requestEnv(planned []plannedDevice) map[string][]string {
	uuids := map[string][]string{}
	for _, p := range planned {
		uuids[p.result.Request] = append(uuids[p.result.Request], p.gpu.UUID)
	}
	env := map[string][]string{}
	for req, ids := range uuids {
		env[req] = []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(ids, ",")}
	}
	return env
}

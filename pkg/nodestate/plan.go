package nodestate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
	"github.com/gpudra/gpudra/pkg/checkpoint"
	"github.com/gpudra/gpudra/pkg/gpu"
)

// plannedDevice is one allocated device of this driver, resolved against the
// inventory, with the config that applies to it.
type plannedDevice struct {
	result resourceapi.DeviceRequestAllocationResult
	gpu    gpu.GPU
	// mig is set for a MIG placement; gpu is then its parent.
	mig    *gpu.MigDevice
	config configapi.Config
	// sharing is what the config's sharing section means for this
	// device (see sharing_plan.go); nil without one.
	sharing *checkpoint.DeviceSharing
}

// plan resolves a claim's allocation into devices of this node and decodes
// the opaque configs that apply to them. It has no side effects, so a claim
// with a bad config, a device this node does not have, or devices that
// overlap each other fails before anything is recorded or created.
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
		p := plannedDevice{result: result}
		if g, ok := node.GPUByDeviceName(result.Device); ok {
			p.gpu = g
		} else if md, ok := node.MigDeviceByName(result.Device); ok {
			p.gpu, p.mig = md.Parent, &md
		} else if g, ok := node.GPUByMonitorName(result.Device); ok {
			// A monitoring device reaches a GPU whoever holds it: only
			// admin access, which only namespaces an admin labelled may
			// ask for, is entitled to it.
			if !isAdmin(result) {
				return nil, fmt.Errorf("%s: request %q: device %s is for monitoring only: ask for it with adminAccess: true (in a namespace labelled resource.kubernetes.io/admin-access=true), or use DeviceClass gpu.gpudra.io for a GPU of your own", ref, result.Request, result.Device)
			}
			p.gpu = g
		} else {
			return nil, fmt.Errorf("%s: request %q: device %q is not a GPU on node %s, nor a MIG placement of one (it may have been removed since the claim was allocated)", ref, result.Request, result.Device, node.Name)
		}
		cfg, err := s.configFor(ref, claim, result, p.mig != nil)
		if err != nil {
			return nil, err
		}
		p.config = cfg
		planned = append(planned, p)
	}
	if err := checkWithinClaim(ref, planned); err != nil {
		return nil, err
	}
	if err := s.planSharing(ref, planned); err != nil {
		return nil, err
	}
	return planned, nil
}

// configFor decodes (strictly, with defaults, validated) every opaque config
// of this driver that applies to the result, and returns the effective one:
// the configs merged field by field, those from the claim over those from
// the DeviceClass and later entries of one source over earlier ones (see
// configapi.MergeParameters). So a DeviceClass can fix a sharing tier and a
// claim still pick its driver capabilities.
//
// The scheduler happens to list class configs before claim configs, but the
// API promises no order, so the precedence is applied here rather than
// inferred from the position in the list.
func (s *State) configFor(ref ClaimRef, claim *resourceapi.ResourceClaim, result resourceapi.DeviceRequestAllocationResult, isMig bool) (configapi.Config, error) {
	applicable := resourceclaim.ConfigForResult(claim.Status.Allocation.Devices.Config, result)
	slices.SortStableFunc(applicable, func(a, b resourceapi.DeviceAllocationConfiguration) int {
		return cmp.Compare(sourceRank(a.Source), sourceRank(b.Source))
	})
	var effectiveWhere string
	var layers [][]byte
	for _, c := range applicable {
		if c.Opaque == nil || c.Opaque.Driver != s.opts.DriverName {
			continue
		}
		// Each config is checked on its own first, so that an error names
		// the config it is in.
		where := configLocation(claim, result, c)
		if _, err := configapi.Decode(c.Opaque.Parameters.Raw); err != nil {
			return nil, fmt.Errorf("%s: request %q: %s: %w", ref, result.Request, where, err)
		}
		layers = append(layers, c.Opaque.Parameters.Raw)
		effectiveWhere = where
	}
	cfg, err := configapi.ForDevice(layers, isMig)
	if err != nil {
		return nil, fmt.Errorf("%s: request %q: device %s (config: %s): %w", ref, result.Request, result.Device, effectiveWhere, err)
	}
	return cfg, nil
}

// sharingOf returns the sharing section of a config, nil when it has none.
func sharingOf(cfg configapi.Config) *configapi.Sharing {
	switch c := cfg.(type) {
	case *configapi.GpuConfig:
		return c.Sharing
	case *configapi.MigConfig:
		return c.Sharing
	}
	return nil
}

// sourceRank orders configs by precedence, lowest first: the DeviceClass's
// are defaults that the claim's own override.
func sourceRank(source resourceapi.AllocationConfigSource) int {
	if source == resourceapi.AllocationConfigSourceClass {
		return 0
	}
	return 1
}

// configLocation says where a config came from, in the words a user would
// look for it: the claim's spec.devices.config[i].opaque (the decoder's
// messages continue with "parameters..."), or the request's DeviceClass.
func configLocation(claim *resourceapi.ResourceClaim, result resourceapi.DeviceRequestAllocationResult, c resourceapi.DeviceAllocationConfiguration) string {
	if c.Source == resourceapi.AllocationConfigSourceClass {
		if class := deviceClassName(claim, result.Request); class != "" {
			return fmt.Sprintf("config of DeviceClass %q", class)
		}
		return "config of the DeviceClass"
	}
	// The allocation copies the claim's configs but not their indices, and
	// the scheduler clears the requests of a config that covers every
	// request ("empty means all"), so the requests may differ: match on the
	// parameters, preferring an entry whose requests match too. Entries
	// with the same parameters are equally wrong, so either is a fair
	// answer.
	sameParams := func(sc resourceapi.DeviceClaimConfiguration) bool {
		return sc.Opaque != nil && c.Opaque != nil && sc.Opaque.Driver == c.Opaque.Driver &&
			string(sc.Opaque.Parameters.Raw) == string(c.Opaque.Parameters.Raw)
	}
	found := -1
	for i, sc := range claim.Spec.Devices.Config {
		if !sameParams(sc) {
			continue
		}
		if slices.Equal(sc.Requests, c.Requests) {
			found = i
			break
		}
		if found < 0 {
			found = i
		}
	}
	if found < 0 {
		return "config of the claim"
	}
	return fmt.Sprintf("spec.devices.config[%d].opaque", found)
}

// deviceClassName returns the DeviceClass of a request ("name", or
// "name/subrequest" for one of its firstAvailable alternatives), or "" when
// the claim's spec does not say.
func deviceClassName(claim *resourceapi.ResourceClaim, request string) string {
	name, sub, _ := strings.Cut(request, "/")
	for _, r := range claim.Spec.Devices.Requests {
		if r.Name != name {
			continue
		}
		if sub == "" {
			if r.Exactly != nil {
				return r.Exactly.DeviceClassName
			}
			return ""
		}
		for _, alt := range r.FirstAvailable {
			if alt.Name == sub {
				return alt.DeviceClassName
			}
		}
	}
	return ""
}

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
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Read-only NVML (Options.ReadOnly): gpudra inventory and gpudra gpu-check
// promise to change nothing on a GPU node, so they open NVML through a
// wrapper that refuses every call that would change a GPU, its MIG
// instances or the driver's settings (MIG mode, compute mode, clocks,
// power limits, ECC, persistence, accounting, GPU and compute instances
// …) with ERROR_NO_PERMISSION, and counts what it refused. Every Device,
// GpuInstance and ComputeInstance NVML hands out is wrapped alike, so no
// call path reaches the real library's mutators. readonly_generated.go
// holds the refused and wrapping methods (go run ./hack/readonlygen);
// TestReadOnlyRefusesEveryMutation keeps it complete.

// refusals records the mutating calls a read-only library refused.
type refusals struct {
	mu    sync.Mutex
	calls []string
}

func (r *refusals) refuse(call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
}

// Refused lists the mutating calls refused so far, in order.
func (r *refusals) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

type readOnlyLibrary struct {
	nvml.Interface
	r *refusals
}

type readOnlyDevice struct {
	nvml.Device
	r *refusals
}

type readOnlyGpuInstance struct {
	nvml.GpuInstance
	r *refusals
}

type readOnlyComputeInstance struct {
	nvml.ComputeInstance
	r *refusals
}

// readOnly wraps lib.
func readOnly(lib nvml.Interface) (nvml.Interface, *refusals) {
	r := &refusals{}
	return readOnlyLibrary{Interface: lib, r: r}, r
}

func (r *refusals) device(d nvml.Device) nvml.Device {
	if d == nil {
		return nil
	}
	if _, ok := d.(readOnlyDevice); ok {
		return d
	}
	return readOnlyDevice{Device: d, r: r}
}

func (r *refusals) devices(ds []nvml.Device) []nvml.Device { return wrapEach(ds, r.device) }

// wrapEach wraps every handle of a list.
func wrapEach[T any](xs []T, wrap func(T) T) []T {
	out := make([]T, len(xs))
	for i, x := range xs {
		out[i] = wrap(x)
	}
	return out
}

func (r *refusals) gpuInstance(gi nvml.GpuInstance) nvml.GpuInstance {
	if gi == nil {
		return nil
	}
	return readOnlyGpuInstance{GpuInstance: gi, r: r}
}

func (r *refusals) gpuInstances(gis []nvml.GpuInstance) []nvml.GpuInstance {
	return wrapEach(gis, r.gpuInstance)
}

func (r *refusals) computeInstance(ci nvml.ComputeInstance) nvml.ComputeInstance {
	if ci == nil {
		return nil
	}
	return readOnlyComputeInstance{ComputeInstance: ci, r: r}
}

func (r *refusals) computeInstances(cis []nvml.ComputeInstance) []nvml.ComputeInstance {
	return wrapEach(cis, r.computeInstance)
}

func (r *refusals) gpuInstanceInfo(info nvml.GpuInstanceInfo) nvml.GpuInstanceInfo {
	info.Device = r.device(info.Device)
	return info
}

func (r *refusals) computeInstanceInfo(info nvml.ComputeInstanceInfo) nvml.ComputeInstanceInfo {
	info.Device = r.device(info.Device)
	info.GpuInstance = r.gpuInstance(info.GpuInstance)
	return info
}

func unwrapDevice(d nvml.Device) nvml.Device {
	if w, ok := d.(readOnlyDevice); ok {
		return w.Device
	}
	return d
}

func unwrapGpuInstance(gi nvml.GpuInstance) nvml.GpuInstance {
	if w, ok := gi.(readOnlyGpuInstance); ok {
		return w.GpuInstance
	}
	return gi
}

func unwrapComputeInstance(ci nvml.ComputeInstance) nvml.ComputeInstance {
	if w, ok := ci.(readOnlyComputeInstance); ok {
		return w.ComputeInstance
	}
	return ci
}

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

package nvmlfake

import (
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// install sets the library-level functions and completes the mock:
// handle-taking functions delegate to the handle's method, the rest of
// what is unset answers ERROR_NOT_SUPPORTED, and everything waits for
// Init.
func (s *Server) install() {
	m := &s.Server.Interface
	m.InitFunc = s.life.init
	m.InitWithFlagsFunc = func(uint32) nvml.Return { return s.life.init() }
	m.ShutdownFunc = s.life.shutdown
	m.ErrorStringFunc = func(r nvml.Return) string { return r.Error() }
	m.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return s.profile.driverVersion, nvml.SUCCESS }
	m.SystemGetNVMLVersionFunc = func() (string, nvml.Return) { return "12." + s.profile.driverVersion, nvml.SUCCESS }
	m.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return s.profile.cudaVersion, nvml.SUCCESS }
	m.SystemGetCudaDriverVersion_v2Func = m.SystemGetCudaDriverVersionFunc
	m.DeviceGetCountFunc = func() (int, nvml.Return) { return len(s.gpus), nvml.SUCCESS }
	m.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(s.gpus) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		if s.gpus[i].lost() {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
		return s.gpus[i].dev, nvml.SUCCESS
	}
	m.DeviceGetHandleByUUIDFunc = s.deviceByUUID
	m.DeviceGetHandleByPciBusIdFunc = s.deviceByPCIBusID
	m.EventSetCreateFunc = s.eventSetCreate

	delegateToHandles(s.Server)
	fillNotSupported(s.Server)
	guardInit(s.Server, s.life.ready, "Init", "InitWithFlags", "Shutdown")
}

// deviceByUUID finds a GPU, or a MIG device, by UUID.
func (s *Server) deviceByUUID(uuid string) (nvml.Device, nvml.Return) {
	if uuid == "" {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	for _, g := range s.gpus {
		if g.uuid == uuid {
			if g.lost() {
				return nil, nvml.ERROR_GPU_IS_LOST
			}
			return g.dev, nvml.SUCCESS
		}
	}
	if strings.HasPrefix(uuid, "MIG-") {
		if d, ok := s.migDeviceByUUID(uuid); ok {
			return d, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// deviceByPCIBusID accepts the spellings NVML does: any case, with a 4- or
// 8-digit domain or none.
func (s *Server) deviceByPCIBusID(busID string) (nvml.Device, nvml.Return) {
	domain, bus, dev, fn, ok := parseBusID(busID)
	if !ok {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	for _, g := range s.gpus {
		if domain == 0 && bus == g.bus && dev == 0 && fn == 0 {
			if g.lost() {
				return nil, nvml.ERROR_GPU_IS_LOST
			}
			return g.dev, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// parseBusID splits "[domain:]bus:device.function" (hex).
func parseBusID(s string) (domain, bus, dev, fn int, ok bool) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) == 2 {
		parts = append([]string{"0"}, parts...)
	}
	if len(parts) != 3 {
		return 0, 0, 0, 0, false
	}
	devStr, fnStr, found := strings.Cut(parts[2], ".")
	if !found {
		return 0, 0, 0, 0, false
	}
	var v [4]int
	for i, f := range []string{parts[0], parts[1], devStr, fnStr} {
		n, err := strconv.ParseUint(f, 16, 32)
		if err != nil {
			return 0, 0, 0, 0, false
		}
		v[i] = int(n)
	}
	return v[0], v[1], v[2], v[3], true
}

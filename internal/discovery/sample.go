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

package discovery

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpudra/gpudra/internal/gpu"
)

// Sample reads what a GPU or MIG device (by GPU-… or MIG-… UUID) reports
// about its use: utilization, memory, temperature and power. A value the
// device does not report is left nil; only a device that cannot be
// reached at all is an error.
func Sample(lib nvml.Interface, uuid string) (gpu.Sample, error) {
	s := gpu.Sample{UUID: uuid}
	d, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return s, fmt.Errorf("device %s: %w", uuid, ret)
	}
	if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
		gpuUtil, memUtil := float64(u.Gpu)/100, float64(u.Memory)/100
		s.Utilization, s.MemoryUtilization = &gpuUtil, &memUtil
	}
	if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
		used, total := m.Used, m.Total
		s.MemoryUsedBytes, s.MemoryTotalBytes = &used, &total
	}
	if t, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		c := float64(t)
		s.TemperatureCelsius = &c
	}
	if mw, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
		w := float64(mw) / 1000
		s.PowerWatts = &w
	}
	return s, nil
}

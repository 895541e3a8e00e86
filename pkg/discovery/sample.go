package discovery

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpudra/gpudra/pkg/gpu"
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

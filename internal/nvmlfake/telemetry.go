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
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"k8s.io/klog/v2"
)

// A fake GPU is idle unless told otherwise: Telemetry says how busy it is,
// the way a test or the e2e suite makes "GPU utilization per pod" move.
// It lives in a JSON file in the state directory, keyed by GPU-… or MIG-…
// UUID, so that another process (a test, an operator with a shell on the
// node) can change what a running plugin reads, as it can inject XIDs.

// Telemetry is what a device reports when asked how busy it is.
type Telemetry struct {
	// GPUUtilization and MemoryUtilization are percentages (0-100) of
	// the last sample period, as nvmlDeviceGetUtilizationRates reports
	// them. Real NVML does not report them for a GPU in MIG mode, nor
	// for a MIG device; the fake does the same.
	GPUUtilization    uint32 `json:"gpuUtilization,omitempty"`
	MemoryUtilization uint32 `json:"memoryUtilization,omitempty"`
	// MemoryUsedBytes is framebuffer memory in use (of the GPU, or of a
	// MIG device's instance).
	MemoryUsedBytes uint64 `json:"memoryUsedBytes,omitempty"`
	// TemperatureC and PowerMilliwatts are what nvmlDeviceGetTemperature
	// (the GPU sensor) and nvmlDeviceGetPowerUsage report. Unset, the
	// fake answers ERROR_NOT_SUPPORTED: it has no evidence of what a
	// given model reads at rest, and invents none.
	TemperatureC    *uint32 `json:"temperatureC,omitempty"`
	PowerMilliwatts *uint32 `json:"powerMilliwatts,omitempty"`
}

const telemetryFileName = "nvmlfake-telemetry.json"

// SetTelemetry records what the device with the given UUID reports from
// now on, for every Server over stateDir.
func SetTelemetry(stateDir, uuid string, t Telemetry) error {
	if stateDir == "" {
		return errors.New("set telemetry: no state directory")
	}
	if err := checkTelemetry(uuid, t); err != nil {
		return err
	}
	unlock, err := lockDir(stateDir)
	if err != nil {
		return fmt.Errorf("set telemetry: %w", err)
	}
	defer unlock()
	path := filepath.Join(stateDir, telemetryFileName)
	all, err := readTelemetry(path)
	if err != nil {
		return fmt.Errorf("set telemetry: %w", err)
	}
	all[uuid] = t
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return fmt.Errorf("set telemetry: %w", err)
	}
	return writeFileAtomic(path, data)
}

// SetTelemetry records what one of this Server's devices reports; it works
// without a state directory too.
func (s *Server) SetTelemetry(uuid string, t Telemetry) error {
	if s.opts.StateDir != "" {
		return SetTelemetry(s.opts.StateDir, uuid, t)
	}
	if err := checkTelemetry(uuid, t); err != nil {
		return err
	}
	s.telemetry.mu.Lock()
	defer s.telemetry.mu.Unlock()
	if s.telemetry.mem == nil {
		s.telemetry.mem = map[string]Telemetry{}
	}
	s.telemetry.mem[uuid] = t
	return nil
}

func checkTelemetry(uuid string, t Telemetry) error {
	if !strings.HasPrefix(uuid, "GPU-") && !strings.HasPrefix(uuid, "MIG-") {
		return fmt.Errorf("set telemetry: %q is not a GPU-… or MIG-… UUID", uuid)
	}
	if t.GPUUtilization > 100 || t.MemoryUtilization > 100 {
		return fmt.Errorf("set telemetry: utilization is a percentage, got %d%% and %d%%", t.GPUUtilization, t.MemoryUtilization)
	}
	return nil
}

func readTelemetry(path string) (map[string]Telemetry, error) {
	all := map[string]Telemetry{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return all, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("%s is corrupt: %w", path, err)
	}
	return all, nil
}

// telemetrySource reads the telemetry file, again only when it changed.
type telemetrySource struct {
	path string
	log  klog.Logger

	mu    sync.Mutex
	mem   map[string]Telemetry // without a state directory
	stamp os.FileInfo
	cur   map[string]Telemetry
}

func (t *telemetrySource) get(uuid string) (Telemetry, nvml.Return) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.path == "" {
		return t.mem[uuid], nvml.SUCCESS
	}
	fi, err := os.Stat(t.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Telemetry{}, nvml.SUCCESS
	case err != nil:
		logStoreError(t.log, err)
		return Telemetry{}, nvml.ERROR_UNKNOWN
	}
	if t.stamp == nil || !os.SameFile(t.stamp, fi) || !t.stamp.ModTime().Equal(fi.ModTime()) || t.stamp.Size() != fi.Size() {
		all, err := readTelemetry(t.path)
		if err != nil {
			logStoreError(t.log, err)
			return Telemetry{}, nvml.ERROR_UNKNOWN
		}
		t.cur, t.stamp = all, fi
	}
	return t.cur[uuid], nvml.SUCCESS
}

// installTelemetry makes a whole GPU report its telemetry. It wraps the
// memory calls already installed, so the total stays the model's.
func (g *fakeGPU) installTelemetry() {
	d := g.dev
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		migOn := false
		if r := g.view(func(gs *gpuState) { migOn = gs.MigMode == nvml.DEVICE_MIG_ENABLE }); r != nvml.SUCCESS {
			return nvml.Utilization{}, r
		}
		if migOn {
			return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
		}
		t, r := g.s.telemetry.get(g.uuid)
		return nvml.Utilization{Gpu: t.GPUUtilization, Memory: t.MemoryUtilization}, r
	}
	installCommonTelemetry(&d.Device, g.s, g.uuid)
}

// installMigTelemetry makes a MIG device handle report the memory its
// instance uses. Utilization stays unsupported, as on hardware.
func installMigTelemetry(h *mock.Device, s *Server, uuid string) {
	prev := h.GetMemoryInfoFunc
	h.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		m, r := prev()
		if r != nvml.SUCCESS {
			return m, r
		}
		t, r := s.telemetry.get(uuid)
		m.Used = min(t.MemoryUsedBytes, m.Total)
		m.Free = m.Total - m.Used
		return m, r
	}
}

// installCommonTelemetry sets memory use, temperature and power.
func installCommonTelemetry(d *mock.Device, s *Server, uuid string) {
	if prev := d.GetMemoryInfoFunc; prev != nil {
		d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			m, r := prev()
			if r != nvml.SUCCESS {
				return m, r
			}
			t, r := s.telemetry.get(uuid)
			m.Used = min(t.MemoryUsedBytes, m.Total)
			m.Free = m.Total - m.Used
			return m, r
		}
	}
	if prev := d.GetMemoryInfo_v2Func; prev != nil {
		d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			m, r := prev()
			if r != nvml.SUCCESS {
				return m, r
			}
			t, r := s.telemetry.get(uuid)
			m.Used = min(t.MemoryUsedBytes, m.Total)
			m.Free = m.Total - m.Used
			return m, r
		}
	}
	d.GetTemperatureFunc = func(sensor nvml.TemperatureSensors) (uint32, nvml.Return) {
		if sensor != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		t, r := s.telemetry.get(uuid)
		if r != nvml.SUCCESS {
			return 0, r
		}
		if t.TemperatureC == nil {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return *t.TemperatureC, nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		t, r := s.telemetry.get(uuid)
		if r != nvml.SUCCESS {
			return 0, r
		}
		if t.PowerMilliwatts == nil {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return *t.PowerMilliwatts, nvml.SUCCESS
	}
}

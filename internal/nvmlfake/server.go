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
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"k8s.io/klog/v2"
)

// Options configure a fake.
type Options struct {
	// Profile is a built-in profile name (see Profiles) or the path of a
	// profile file (see ProfileFile).
	Profile string
	// NodeName seeds the GPUs' UUIDs: stable for a node, different
	// between nodes.
	NodeName string
	// StateDir holds the GPUs' persistent state (MIG mode and instances)
	// and the injected XID events. Empty keeps the state in memory: then
	// nothing survives the Server, and only Server.InjectXID reaches it.
	StateDir string
	// Logger gets what the fake cannot answer through NVML's return
	// codes: a state file it cannot read or write. The zero value logs
	// nothing.
	Logger klog.Logger
}

// Server is a node's fake GPUs behind nvml.Interface. It is safe for
// concurrent use, and several Servers (in one process or several) over
// the same StateDir share their GPUs' state like processes share real
// GPUs.
type Server struct {
	*server.Server

	opts    Options
	profile *profile
	gpus    []*fakeGPU
	store   *store
	events  *eventLog
	// telemetry is what the devices report when asked how busy they are.
	telemetry *telemetrySource
	life      lifecycle
	handles   handleCache
}

var _ nvml.Interface = (*Server)(nil)

// New builds the fake GPUs of opts.Profile and loads their state from
// opts.StateDir. Like libnvidia-ml, the result answers ERROR_UNINITIALIZED
// until Init is called.
func New(opts Options) (*Server, error) {
	if opts.NodeName == "" {
		return nil, errors.New("nvmlfake: a node name is required: it seeds the GPU UUIDs")
	}
	prof, err := loadProfile(opts.Profile)
	if err != nil {
		return nil, fmt.Errorf("nvmlfake: %w", err)
	}
	st, err := newStore(opts.StateDir, opts.Logger)
	if err != nil {
		return nil, fmt.Errorf("nvmlfake: %w", err)
	}
	s := &Server{opts: opts, profile: prof, store: st, events: newEventLog(opts.StateDir), telemetry: &telemetrySource{log: opts.Logger}}
	if opts.StateDir != "" {
		s.telemetry.path = filepath.Join(opts.StateDir, telemetryFileName)
	}
	s.handles.init()

	configs := make([]gpus.Config, len(prof.gpus))
	for i, g := range prof.gpus {
		configs[i] = g.model.config
	}
	s.Server = server.NewServerWithGPUs(prof.driverVersion, "12."+prof.driverVersion, prof.cudaVersion, configs...)

	islandSize := map[int]int{}
	for _, g := range prof.gpus {
		islandSize[g.island]++
	}
	for i, slot := range prof.gpus {
		dev := s.Server.Devices[i].(*server.Device)
		g := &fakeGPU{
			s:      s,
			dev:    dev,
			index:  i,
			model:  slot.model,
			uuid:   gpuUUID(opts.NodeName, i, slot.model),
			pcie:   slot.pcie,
			bus:    slot.bus,
			island: slot.island,
		}
		if slot.island != noIsland {
			g.nvlinkPeers = islandSize[slot.island] - 1
		}
		g.install()
		s.gpus = append(s.gpus, g)
	}
	if err := s.loadState(); err != nil {
		return nil, fmt.Errorf("nvmlfake: state in %s: %w", opts.StateDir, err)
	}
	s.install()
	return s, nil
}

// PCIeSlots says where each GPU sits in the host's PCIe tree, in index
// order: what the sysfs of a real node would show.
func (s *Server) PCIeSlots() []PCIeSlot {
	out := make([]PCIeSlot, len(s.gpus))
	for i, g := range s.gpus {
		out[i] = g.pcie
	}
	return out
}

// StateDir is the directory holding the persistent state ("" in memory).
func (s *Server) StateDir() string { return s.opts.StateDir }

// gpuByHandle finds the fake GPU behind a whole-GPU handle.
func (s *Server) gpuByHandle(d nvml.Device) (*fakeGPU, bool) {
	for _, g := range s.gpus {
		if nvml.Device(g.dev) == d {
			return g, true
		}
	}
	return nil, false
}

// lifecycle counts Init and Shutdown calls, as libnvidia-ml does.
type lifecycle struct {
	mu   sync.Mutex
	refs int
}

func (l *lifecycle) init() nvml.Return {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refs++
	return nvml.SUCCESS
}

func (l *lifecycle) shutdown() nvml.Return {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs == 0 {
		return nvml.ERROR_UNINITIALIZED
	}
	l.refs--
	return nvml.SUCCESS
}

func (l *lifecycle) ready() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refs > 0
}

func logStoreError(logger klog.Logger, err error) {
	logger.Error(err, "nvmlfake: GPU state unavailable; answering ERROR_UNKNOWN")
}

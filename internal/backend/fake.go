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
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// fakeFiles are what a container receives for nvmlfake's GPUs: harmless
// /dev/null under the GPU's device node names, and the GPU's UUID in an
// environment variable so a test workload can tell which GPU it got.
type fakeFiles struct {
	stateDir string
	// imexMajor is the IMEX channels' major (0: DefaultFakeIMEXMajor).
	imexMajor int
}

var _ deviceFiles = fakeFiles{}

func openFake(ctx context.Context, opts Options) (*Backend, error) {
	if opts.FakeProfile == "" {
		return nil, fmt.Errorf("the fake backend needs a profile (built-in: %s; or the path of a profile file)",
			strings.Join(nvmlfake.Profiles(), ", "))
	}
	if opts.FakeStateDir == "" {
		return nil, errors.New("the fake backend needs a state directory: the fake GPUs keep their MIG state there")
	}
	srv, err := nvmlfake.New(nvmlfake.Options{Profile: opts.FakeProfile, NodeName: opts.NodeName, StateDir: opts.FakeStateDir, Logger: klog.FromContext(ctx)})
	if err != nil {
		// nvmlfake's errors name the profile, or the state file that
		// failed; the directory is the caller's to name (a throw-away one
		// means nothing to a user).
		return nil, fmt.Errorf("fake backend: %w", err)
	}
	if err := writeSysfs(opts.FakeStateDir, srv.PCIeSlots()); err != nil {
		return nil, fmt.Errorf("fake sysfs in %s: %w", opts.FakeStateDir, err)
	}
	var lib nvml.Interface = srv
	var refused *refusals
	if opts.ReadOnly {
		lib, refused = readOnly(srv)
	}
	l, err := initLibrary(lib, opts.NodeName, "fake profile "+opts.FakeProfile)
	if err != nil {
		return nil, err
	}
	if opts.InventoryOnly {
		return &Backend{library: l, files: fakeFiles{stateDir: opts.FakeStateDir, imexMajor: opts.FakeIMEXMajor}, policy: newFakePolicy(srv), refused: refused}, nil
	}
	driver, err := fakeDriverEdits(ctx, srv, lib, opts)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	return &Backend{library: l, files: fakeFiles{stateDir: opts.FakeStateDir, imexMajor: opts.FakeIMEXMajor}, driver: driver, policy: newFakePolicy(srv), refused: refused}, nil
}

// fakeDriverEdits writes the fake driver installation into the state
// directory and finds in it what every container needs, as on a real
// node.
func fakeDriverEdits(ctx context.Context, srv *nvmlfake.Server, lib nvml.Interface, opts Options) (gpu.Edits, error) {
	version, ret := srv.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return gpu.Edits{}, fmt.Errorf("fake driver version: %w", ret)
	}
	root := filepath.Join(opts.FakeStateDir, fakeDriverRootDir)
	if err := writeFakeDriverRoot(root, version); err != nil {
		return gpu.Edits{}, fmt.Errorf("fake driver root in %s: %w", opts.FakeStateDir, err)
	}
	// The fake state directory has the same path on the host.
	return driverEdits(ctx, lib, driverRoot{path: root}, opts.CDIHookPath)
}

// fakeDriverRootDir is the fake driver installation's directory in the
// fake state directory.
const fakeDriverRootDir = "driver-root"

// standIn is the host device every fake device node is made from.
const standIn = "/dev/null"

func (fakeFiles) commonEdits() gpu.Edits {
	return gpu.Edits{DeviceNodes: []gpu.DeviceNode{{Path: "/dev/nvidiactl", HostPath: standIn}}}
}

func (fakeFiles) deviceEdits(g gpu.GPU) gpu.Edits {
	return gpu.Edits{
		Env:         []string{fmt.Sprintf("GPUDRA_FAKE_GPU_%d=%s", g.Minor, g.UUID)},
		DeviceNodes: []gpu.DeviceNode{{Path: fmt.Sprintf("/dev/nvidia%d", g.Minor), HostPath: standIn}},
	}
}

// sysfsRoot is the state directory, which holds the fake sys/ tree.
func (f fakeFiles) sysfsRoot() string { return f.stateDir }

// migDeviceEdits gives the parent's stand-in device node and
// GPUDRA_FAKE_MIG_<parent minor>_<GPU instance ID>=<MIG UUID>, so a test
// workload can tell which MIG device it got.
func (fakeFiles) migDeviceEdits(parent gpu.GPU, giID, _ int, migUUID string) (gpu.Edits, error) {
	return gpu.Edits{
		Env:         []string{fmt.Sprintf("GPUDRA_FAKE_MIG_%d_%d=%s", parent.Minor, giID, migUUID)},
		DeviceNodes: []gpu.DeviceNode{{Path: fmt.Sprintf("/dev/nvidia%d", parent.Minor), HostPath: standIn}},
	}, nil
}

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
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/gpu"
)

// TestMigLifecycle: enable MIG on a Hopper GPU at once, create a GPU and
// compute instance at a placement, see it, refuse an overlapping one,
// destroy it, and turn MIG off again.
func TestMigLifecycle(t *testing.T) {
	be := openFakeBackend(t, "dgx-h100", t.TempDir())
	node, _ := be.Discover(context.Background())
	g := node.GPUs[2]
	p, _ := g.MIG.ProfileByName("2g.20gb")
	pl := gpu.MigPlacement{Start: 2, Size: 2}
	if _, err := be.CreateGPUInstance(g.UUID, p.ID, pl); err == nil {
		t.Fatal("created a GPU instance with MIG off")
	}
	if err := be.SetMigMode(g.UUID, true); err != nil {
		t.Fatal(err)
	}
	if cur, _, _ := be.MigMode(g.UUID); !cur {
		t.Fatal("MIG mode not on")
	}
	gi, err := be.CreateGPUInstance(g.UUID, p.ID, pl)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := be.CreateComputeInstance(g.UUID, gi)
	if err != nil {
		t.Fatal(err)
	}
	uuid, err := be.MigDeviceUUID(g.UUID, gi, ci)
	if err != nil || !strings.HasPrefix(uuid, "MIG-") {
		t.Fatalf("MIG UUID %q, %v", uuid, err)
	}
	one, _ := g.MIG.ProfileByName("1g.10gb")
	if _, err := be.CreateGPUInstance(g.UUID, one.ID, gpu.MigPlacement{Start: 3, Size: 1}); !errors.Is(err, ErrInsufficientResources) {
		t.Errorf("overlapping create = %v, want ErrInsufficientResources", err)
	}
	insts, err := be.MigInstances(g.UUID)
	if err != nil || len(insts) != 1 || insts[0].Placement != pl || len(insts[0].ComputeInstances) != 1 {
		t.Fatalf("instances %+v, %v", insts, err)
	}
	if err := be.SetMigMode(g.UUID, false); err == nil {
		t.Error("MIG mode turned off under an instance")
	}
	// A GPU instance ID that names another instance is left alone.
	if err := be.DestroyGPUInstance(g.UUID, gi, one.ID, pl); err != nil {
		t.Fatal(err)
	}
	if insts, _ := be.MigInstances(g.UUID); len(insts) != 1 {
		t.Fatal("destroyed an instance of another profile")
	}
	if err := be.DestroyComputeInstance(g.UUID, gi, ci); err != nil {
		t.Fatal(err)
	}
	if err := be.DestroyGPUInstance(g.UUID, gi, p.ID, pl); err != nil {
		t.Fatal(err)
	}
	// Gone is not an error.
	if err := be.DestroyComputeInstance(g.UUID, gi, ci); err != nil {
		t.Error(err)
	}
	if err := be.DestroyGPUInstance(g.UUID, gi, p.ID, pl); err != nil {
		t.Error(err)
	}
	if insts, _ := be.MigInstances(g.UUID); len(insts) != 0 {
		t.Errorf("instances left: %+v", insts)
	}
	if err := be.SetMigMode(g.UUID, false); err != nil {
		t.Error(err)
	}
}

// TestMigModeAmpereNeedsReset: Ampere keeps a MIG mode change pending.
func TestMigModeAmpereNeedsReset(t *testing.T) {
	be := openFakeBackend(t, "dgx-a100", t.TempDir())
	node, _ := be.Discover(context.Background())
	if err := be.SetMigMode(node.GPUs[0].UUID, true); !errors.Is(err, ErrResetRequired) {
		t.Fatalf("SetMigMode on Ampere = %v, want ErrResetRequired", err)
	}
	if cur, pending, _ := be.MigMode(node.GPUs[0].UUID); cur || !pending {
		t.Errorf("mode %v pending %v", cur, pending)
	}
}

// TestNVMLMigDeviceEdits: the capability nodes come from the driver's
// /proc capability files, as NVIDIA's container toolkit derives them.
func TestNVMLMigDeviceEdits(t *testing.T) {
	proc := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(proc, capsDir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	write("gpu3/mig/gi2/access", "DeviceFileMinor: 30\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
	write("gpu3/mig/gi2/ci0/access", "DeviceFileMinor: 31\nDeviceFileMode: 292\n")
	b := &nvmlFiles{devRoot: "/", procRoot: proc}
	e, err := b.migDeviceEdits(gpu.GPU{Minor: 3}, 2, 0, "MIG-x")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, n := range e.DeviceNodes {
		paths = append(paths, n.Path)
	}
	if got := strings.Join(paths, " "); got != "/dev/nvidia3 /dev/nvidia-caps/nvidia-cap30 /dev/nvidia-caps/nvidia-cap31" {
		t.Errorf("device nodes %s", got)
	}
	if _, err := b.migDeviceEdits(gpu.GPU{Minor: 3}, 5, 0, "MIG-y"); err == nil {
		t.Error("edits for a GPU instance the driver does not list")
	}
	write("gpu1/mig/gi0/access", "DeviceFileMode: 292\n")
	if _, err := b.migDeviceEdits(gpu.GPU{Minor: 1}, 0, 0, "MIG-z"); err == nil || !strings.Contains(err.Error(), "DeviceFileMinor") {
		t.Errorf("capability without a minor: %v", err)
	}
}

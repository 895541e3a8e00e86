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
	"testing"

	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// TestGoneGPU: a GPU that fell off the bus is left out of discovery (the
// others are still published), and every MIG operation on it says the GPU
// is gone, as does one on a UUID the node does not have; the other GPUs
// keep working.
func TestGoneGPU(t *testing.T) {
	dir := t.TempDir()
	be := openFakeBackend(t, "dgx-h100", dir)
	node, err := be.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lost := node.GPUs[3]
	if err := be.SetMigMode(lost.UUID, true); err != nil {
		t.Fatal(err)
	}
	if err := nvmlfake.LoseGPU(dir, lost.UUID); err != nil {
		t.Fatal(err)
	}

	after, err := be.Discover(context.Background())
	if err != nil {
		t.Fatalf("Discover with a GPU off the bus: %v", err)
	}
	if len(after.GPUs) != 7 {
		t.Errorf("%d GPUs discovered, want the 7 that are left", len(after.GPUs))
	}
	for _, g := range after.GPUs {
		if g.UUID == lost.UUID {
			t.Error("the lost GPU was discovered")
		}
	}

	for name, uuid := range map[string]string{"lost": lost.UUID, "never there": "GPU-00000000-0000-0000-0000-000000000000"} {
		if _, err := be.MigInstances(uuid); !errors.Is(err, gpu.ErrGPUGone) {
			t.Errorf("%s: MigInstances = %v, want ErrGPUGone", name, err)
		}
		if err := be.DestroyGPUInstance(uuid, 1, 19, gpu.MigPlacement{Start: 0, Size: 1}); !errors.Is(err, gpu.ErrGPUGone) {
			t.Errorf("%s: DestroyGPUInstance = %v, want ErrGPUGone", name, err)
		}
		if _, _, err := be.MigMode(uuid); !errors.Is(err, gpu.ErrGPUGone) {
			t.Errorf("%s: MigMode = %v, want ErrGPUGone", name, err)
		}
	}
	if _, err := be.MigInstances(node.GPUs[4].UUID); err != nil {
		t.Errorf("another GPU: %v", err)
	}
}

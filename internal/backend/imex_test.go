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
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/gpu"
)

// procDevices is /proc/devices in the shape the kernel writes it, with the
// NVIDIA driver's character devices (the IMEX channels' major is dynamic;
// 234 as in NVIDIA's IMEX guide). A block device of the same name must
// not be taken for it.
const procDevices = `Character devices:
  1 mem
  4 /dev/vc/0
195 nvidia
234 nvidia-caps-imex-channels
235 nvidia-caps
509 nvidia-uvm

Block devices:
  7 loop
  8 sd
240 nvidia-caps-imex-channels
`

func TestIMEXChannelEdits(t *testing.T) {
	proc := t.TempDir()
	if err := os.WriteFile(filepath.Join(proc, "devices"), []byte(procDevices), 0o644); err != nil {
		t.Fatal(err)
	}
	ch := gpu.IMEXChannel{Domain: "u.1", Number: 17}
	edits, err := nvmlFiles{devRoot: "/", procRoot: proc}.imexChannelEdits(ch)
	if err != nil {
		t.Fatal(err)
	}
	want := gpu.DeviceNode{Path: "/dev/nvidia-caps-imex-channels/channel17", Type: "c", Major: 234, Minor: 17}
	if len(edits.DeviceNodes) != 1 || edits.DeviceNodes[0] != want {
		t.Errorf("nvml: %+v, want %+v", edits.DeviceNodes, want)
	}

	fake, err := fakeFiles{imexMajor: 240}.imexChannelEdits(ch)
	if err != nil {
		t.Fatal(err)
	}
	if n := fake.DeviceNodes[0]; n.HostPath != standIn || n.Major != 240 || n.Minor != 17 || n.Path != want.Path {
		t.Errorf("fake: %+v, want the stand-in with major 240, minor 17", n)
	}

	if err := os.WriteFile(filepath.Join(proc, "devices"), []byte("Character devices:\n195 nvidia\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (nvmlFiles{procRoot: proc}).imexChannelEdits(ch); err == nil || !strings.Contains(err.Error(), gpu.IMEXChannelsDevice) {
		t.Errorf("a driver without IMEX channels: %v", err)
	}
}

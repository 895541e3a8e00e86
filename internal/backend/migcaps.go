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
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpudra/gpudra/internal/gpu"
)

// MIG access on a real node goes through capability device nodes: the
// driver lists, under /proc/driver/nvidia/capabilities, one "access" file
// per GPU instance and per compute instance, whose DeviceFileMinor names
// the node /dev/nvidia-caps/nvidia-cap<minor> that grants it. A container
// gets the parent GPU's /dev/nvidia<minor> and both capability nodes; this
// is what the NVIDIA container toolkit does too.

// capsDir is where the driver publishes capabilities, below a proc root.
const capsDir = "driver/nvidia/capabilities"

// migDeviceEdits gives the parent GPU's device node and the GPU and
// compute instance capability nodes of the MIG device.
func (b nvmlFiles) migDeviceEdits(parent gpu.GPU, giID, ciID int, _ string) (gpu.Edits, error) {
	gi := filepath.Join(b.procRoot, capsDir, fmt.Sprintf("gpu%d", parent.Minor), "mig", fmt.Sprintf("gi%d", giID))
	e := gpu.Edits{DeviceNodes: []gpu.DeviceNode{b.deviceNode(fmt.Sprintf("/dev/nvidia%d", parent.Minor))}}
	for _, access := range []string{filepath.Join(gi, "access"), filepath.Join(gi, fmt.Sprintf("ci%d", ciID), "access")} {
		minor, err := capabilityMinor(access)
		if err != nil {
			return gpu.Edits{}, err
		}
		e.DeviceNodes = append(e.DeviceNodes, b.deviceNode(fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", minor)))
	}
	return e, nil
}

// capabilityMinor reads "DeviceFileMinor: <n>" from a capability file.
func capabilityMinor(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("MIG capability: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(key) != "DeviceFileMinor" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("MIG capability %s: bad DeviceFileMinor %q", path, value)
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("MIG capability %s: %w", path, err)
	}
	return 0, fmt.Errorf("MIG capability %s: no DeviceFileMinor", path)
}

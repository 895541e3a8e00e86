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

package slicebuilder

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/internal/gpu"
)

const testDriver = "gpu.gpudra.io"

const mib = 1 << 20

// noSysfs is a SysfsRoot with no sys/ below it, so that tests never read
// the host's /sys (whose PCI addresses may well match the fixtures').
const noSysfs = "/nonexistent/gpudra-test-root"

// h100 is an H100 SXM as NVML reports it (81559 MiB, 132 SMs).
func h100(index, minor int, group int, busID string) gpu.GPU {
	return gpu.GPU{
		Index:                 index,
		Minor:                 minor,
		UUID:                  fmt.Sprintf("GPU-h100-%04d", minor),
		ProductName:           "NVIDIA H100 80GB HBM3",
		Brand:                 "Nvidia",
		Architecture:          "Hopper",
		CUDAComputeCapability: "9.0",
		MemoryBytes:           81559 * mib,
		Multiprocessors:       132,
		MigCapable:            true,
		NVLinkGroup:           group,
		PCIBusID:              busID,
	}
}

// a100 is an A100 SXM4 40GB (40960 MiB = exactly 40Gi, 108 SMs).
func a100(index, minor int, group int, busID string) gpu.GPU {
	return gpu.GPU{
		Index:                 index,
		Minor:                 minor,
		UUID:                  fmt.Sprintf("GPU-a100-%04d", minor),
		ProductName:           "NVIDIA A100-SXM4-40GB",
		Brand:                 "Nvidia",
		Architecture:          "Ampere",
		CUDAComputeCapability: "8.0",
		MemoryBytes:           40960 * mib,
		Multiprocessors:       108,
		MigCapable:            true,
		NVLinkGroup:           group,
		PCIBusID:              busID,
	}
}

// l4 is a small non-MIG GPU whose SM count discovery could not read.
func l4(index, minor int, busID string) gpu.GPU {
	return gpu.GPU{
		Index:                 index,
		Minor:                 minor,
		UUID:                  fmt.Sprintf("GPU-l4-%04d", minor),
		ProductName:           "NVIDIA L4",
		Brand:                 "Nvidia",
		Architecture:          "Ada Lovelace",
		CUDAComputeCapability: "8.9",
		MemoryBytes:           23034 * mib,
		MigCapable:            false,
		NVLinkGroup:           index,
		PCIBusID:              busID,
	}
}

// mixedNode has one GPU of each kind, listed out of minor order on purpose.
func mixedNode() gpu.Node {
	return gpu.Node{
		Name:              "node-a",
		DriverVersion:     "560.28.03",
		CUDADriverVersion: "12.6",
		GPUs: []gpu.GPU{
			a100(1, 3, 1, "0000:3b:00.0"),
			h100(0, 0, 0, "0000:1b:00.0"),
			l4(2, 7, "0000:5e:00.0"),
		},
	}
}

// h100Node is an n-GPU H100 node in one NVLink island, at bus IDs
// 0000:<i>:00.0 (see h100Sysfs).
func h100Node(name string, n int) gpu.Node {
	node := gpu.Node{Name: name, DriverVersion: "550.54.15", CUDADriverVersion: "12.4"}
	for i := range n {
		node.GPUs = append(node.GPUs, h100(i, i, 0, fmt.Sprintf("0000:%02x:00.0", i)))
	}
	return node
}

// h100Sysfs is a fake sysfs for h100Node(n): one PCIe root per GPU, NUMA
// node i%2.
func h100Sysfs(t testing.TB, node gpu.Node) string {
	t.Helper()
	var pci []fakePCIDevice
	for i, g := range node.GPUs {
		pci = append(pci, fakePCIDevice{busID: g.PCIBusID, pcieRoot: fmt.Sprintf("pci0000:%02x", i), numaNode: i % 2})
	}
	return fakeSysfs(t, pci)
}

// fakeSysfs builds, under a temporary host root, the sysfs layout that
// deviceattribute reads:
//
//	sys/bus/pci/devices/<busID> -> ../../../devices/<pcieRoot>/<bridge>/<busID>
//	sys/devices/<pcieRoot>/<bridge>/<busID>/numa_node
//
// It returns the host root (what Options.SysfsRoot takes).
func fakeSysfs(t testing.TB, devices []fakePCIDevice) string {
	t.Helper()
	root := t.TempDir()
	links := filepath.Join(root, "sys", "bus", "pci", "devices")
	if err := os.MkdirAll(links, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range devices {
		rel := filepath.Join("devices", d.pcieRoot, "0000:00:01.0", d.busID)
		dir := filepath.Join(root, "sys", rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		numa := fmt.Sprintf("%d\n", d.numaNode)
		if err := os.WriteFile(filepath.Join(dir, "numa_node"), []byte(numa), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "..", rel), filepath.Join(links, d.busID)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

type fakePCIDevice struct {
	busID    string
	pcieRoot string
	numaNode int
}

func devicesEqual(a, b []resourceapi.Device) bool {
	return resourceslice.DevicesDeepEqual(a, b)
}

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

import "fmt"

// PCIeSlot is where a fake GPU sits in the host's PCIe tree: what sysfs
// would say about it on a real node. Two GPUs share each root complex
// behind a PCIe switch, and the root complexes are split over two NUMA
// nodes, like on a DGX/HGX board.
type PCIeSlot struct {
	// BusID is the canonical address, "0000:1b:00.0".
	BusID string
	// RootComplex is the sysfs name of the PCIe root, "pci0000:18".
	RootComplex string
	// Bridges are the addresses between the root complex and the GPU, top
	// down: root port, switch upstream port, switch downstream port.
	Bridges []string
	// NUMANode is the GPU's NUMA node.
	NUMANode int
}

// pcieSlot lays out GPU index of n. Bus numbers: root complex r owns the
// buses from 0x18 + 0x18*r; its root port is on the first, the switch on
// the next two, and the two GPUs three and eleven buses below it. With at
// most 16 GPUs (8 roots) every bus stays below 0x100.
func pcieSlot(index, n int) PCIeSlot {
	r := index / 2
	roots := (n + 1) / 2
	root := 0x18 + 0x18*r
	side := index % 2
	gpuBus := busNumber(index)
	return PCIeSlot{
		BusID:       fmt.Sprintf("0000:%02x:00.0", gpuBus),
		RootComplex: fmt.Sprintf("pci0000:%02x", root),
		Bridges: []string{
			fmt.Sprintf("0000:%02x:01.0", root),
			fmt.Sprintf("0000:%02x:00.0", root+1),
			fmt.Sprintf("0000:%02x:%02x.0", root+2, 8*side),
		},
		// The first half of the root complexes hang off socket 0.
		NUMANode: r * 2 / roots,
	}
}

// placedSlot is a GPU placed by its profile; side is how many GPUs of the
// same root come before it (each gets its own switch downstream port).
func placedSlot(p PCIPlacement, side int) PCIeSlot {
	return PCIeSlot{
		BusID:       fmt.Sprintf("0000:%02x:00.0", p.Bus),
		RootComplex: fmt.Sprintf("pci0000:%02x", p.Root),
		Bridges: []string{
			fmt.Sprintf("0000:%02x:01.0", p.Root),
			fmt.Sprintf("0000:%02x:00.0", p.Root+1),
			fmt.Sprintf("0000:%02x:%02x.0", p.Root+2, side),
		},
		NUMANode: p.NUMANode,
	}
}

// busNumber is the PCI bus of GPU index (see pcieSlot).
func busNumber(index int) int { return 0x18 + 0x18*(index/2) + 3 + 8*(index%2) }

// nvmlBusID is the bus ID as NVML writes it: 8-digit domain, upper case.
func nvmlBusID(bus int) string { return fmt.Sprintf("%08X:%02X:00.0", 0, bus) }

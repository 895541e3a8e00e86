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
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpudra/gpudra/internal/nvmlfake"
)

// writeSysfs lays out, under root/sys, the part of a host's sysfs that
// the standard device attributes read (k8s.io/dynamic-resource-allocation/
// deviceattribute): each GPU's device directory below its PCIe root
// complex, with numa_node; the bus/pci/devices symlinks that point there;
// and the NUMA nodes with their distances and CPUs. The tree is rebuilt
// aside and swapped in, so it always matches the current profile.
func writeSysfs(root string, slots []nvmlfake.PCIeSlot) error {
	tmp, err := os.MkdirTemp(root, ".sys-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	numaNodes := 1
	for _, s := range slots {
		numaNodes = max(numaNodes, s.NUMANode+1)
		if err := writePCIDevice(tmp, s); err != nil {
			return fmt.Errorf("GPU %s: %w", s.BusID, err)
		}
	}
	if err := writeNUMANodes(tmp, numaNodes); err != nil {
		return err
	}
	sys := filepath.Join(root, "sys")
	if err := os.RemoveAll(sys); err != nil {
		return err
	}
	return os.Rename(tmp, sys)
}

// writePCIDevice creates devices/<root complex>/<bridges…>/<bus ID> with
// numa_node files, and the bus/pci/devices/<bus ID> symlink, relative as
// the kernel makes it.
func writePCIDevice(sys string, s nvmlfake.PCIeSlot) error {
	rel := filepath.Join(append(append([]string{"devices", s.RootComplex}, s.Bridges...), s.BusID)...)
	numa := []byte(fmt.Sprintf("%d\n", s.NUMANode))
	dir := filepath.Join(sys, "devices", s.RootComplex)
	for _, part := range append(append([]string{}, s.Bridges...), s.BusID) {
		dir = filepath.Join(dir, part)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "numa_node"), numa, 0o644); err != nil {
			return err
		}
	}
	links := filepath.Join(sys, "bus", "pci", "devices")
	if err := os.MkdirAll(links, 0o755); err != nil {
		return err
	}
	return os.Symlink(filepath.Join("..", "..", "..", rel), filepath.Join(links, s.BusID))
}

// cpusPerNode is how many CPUs each fake NUMA node has; few, since only
// their socket matters.
const cpusPerNode = 2

// writeNUMANodes creates devices/system/node/node<N> (distance, cpulist)
// and devices/system/cpu/cpu<C> (node link, physical_package_id). The
// nodes are spread over two sockets, the first half on socket 0 (a DGX
// A100's AMD EPYCs in NPS4 mode have four nodes each, a DGX H100's Xeons
// one each).
func writeNUMANodes(sys string, n int) error {
	socket := func(node int) int { return node * min(n, 2) / n }
	for node := range n {
		dir := filepath.Join(sys, "devices", "system", "node", fmt.Sprintf("node%d", node))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		dist := make([]string, n)
		for other := range n {
			switch {
			case other == node:
				dist[other] = "10"
			case socket(other) == socket(node):
				dist[other] = "12"
			default:
				dist[other] = "32"
			}
		}
		first := node * cpusPerNode
		files := map[string]string{
			"distance": strings.Join(dist, " ") + "\n",
			"cpulist":  fmt.Sprintf("%d-%d\n", first, first+cpusPerNode-1),
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				return err
			}
		}
		for cpu := first; cpu < first+cpusPerNode; cpu++ {
			cpuDir := filepath.Join(sys, "devices", "system", "cpu", fmt.Sprintf("cpu%d", cpu))
			if err := os.MkdirAll(filepath.Join(cpuDir, "topology"), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(cpuDir, "topology", "physical_package_id"), []byte(fmt.Sprintf("%d\n", socket(node))), 0o644); err != nil {
				return err
			}
			if err := os.Symlink(filepath.Join("..", "..", "node", fmt.Sprintf("node%d", node)), filepath.Join(cpuDir, fmt.Sprintf("node%d", node))); err != nil {
				return err
			}
		}
	}
	return nil
}

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

// DefaultFakeIMEXMajor is the major the fake backend gives the IMEX
// channels' character device, unless Options.FakeIMEXMajor says
// otherwise. The real one is dynamic and "can differ between nodes";
// NVIDIA's IMEX guide shows 234
// (https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/imexchannels.html).
const DefaultFakeIMEXMajor = 234

// IMEXChannelEdits is what a container needs to use an IMEX channel: its
// character device /dev/nvidia-caps-imex-channels/channel<n>, with the
// major the driver registered on this node and minor n. The runtime
// creates the node in the container from these numbers, so the host needs
// no channel nodes (nothing creates them there).
func (b *Backend) IMEXChannelEdits(ch gpu.IMEXChannel) (gpu.Edits, error) {
	return b.files.imexChannelEdits(ch)
}

func channelNode(ch gpu.IMEXChannel, hostPath string, major int64) gpu.Edits {
	return gpu.Edits{DeviceNodes: []gpu.DeviceNode{{
		Path: ch.DevicePath(), HostPath: hostPath, Type: "c", Major: major, Minor: int64(ch.Number),
	}}}
}

// imexChannelEdits reads the major from /proc/devices, where the driver
// registers the device: it is dynamic, and read at each prepare since a
// driver reload may change it.
func (f nvmlFiles) imexChannelEdits(ch gpu.IMEXChannel) (gpu.Edits, error) {
	path := filepath.Join(f.procRoot, "devices")
	major, err := charDeviceMajor(path, gpu.IMEXChannelsDevice)
	if err != nil {
		return gpu.Edits{}, err
	}
	return channelNode(ch, "", major), nil
}

// imexChannelEdits gives the fake's configured major, and the stand-in
// on the host, as for every fake device node.
func (f fakeFiles) imexChannelEdits(ch gpu.IMEXChannel) (gpu.Edits, error) {
	major := f.imexMajor
	if major == 0 {
		major = DefaultFakeIMEXMajor
	}
	return channelNode(ch, standIn, int64(major)), nil
}

// charDeviceMajor reads the major of a character device driver from a
// /proc/devices file ("Character devices:", then "<major> <name>" lines,
// then "Block devices:").
func charDeviceMajor(path, name string) (int64, error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read the major of %s: %w", name, err)
	}
	defer func() { _ = file.Close() }()
	sc := bufio.NewScanner(file)
	char := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "Character devices:":
			char = true
		case strings.HasSuffix(line, "devices:"):
			char = false
		case char:
			fields := strings.Fields(line)
			if len(fields) == 2 && fields[1] == name {
				major, err := strconv.ParseInt(fields[0], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("%s: major %q of %s: %w", path, fields[0], name, err)
				}
				return major, nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("%s lists no character device %s: the NVIDIA driver on this node offers no IMEX channels (a driver without multi-node NVLink support, or not loaded)", path, name)
}

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

package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// IMEXChannel is an IMEX channel of a multi-node NVLink domain, as a claim
// holds it (docs/nvlink.md): GPUs of different nodes of the domain import
// each other's memory through a channel they share. The driver has 2048
// (0…2047); gpudra-controller publishes them as devices channel-<n> of the
// domain's pool.
type IMEXChannel struct {
	// Domain is the NVLink domain, "<clusterUUID>.<cliqueID>".
	Domain string
	// Number is the channel, the minor of its device node.
	Number int
}

// IMEXChannelsDevice is the character device the NVIDIA driver registers
// for the channels, as /proc/devices names it; its major is dynamic and
// can differ between nodes (NVIDIA's IMEX guide, "IMEX channels").
const IMEXChannelsDevice = "nvidia-caps-imex-channels"

// MaxIMEXChannel is the highest channel number the driver has.
const MaxIMEXChannel = 2047

// DevicePath is the channel's device node in a container,
// /dev/nvidia-caps-imex-channels/channel<n>, the path CUDA opens.
func (c IMEXChannel) DevicePath() string {
	return fmt.Sprintf("/dev/%s/channel%d", IMEXChannelsDevice, c.Number)
}

// channelPrefix starts a channel device's name (slicebuilder's
// ChannelDeviceName, which this layer cannot import).
const channelPrefix = "channel-"

// ParseChannelDeviceName reads the channel number of a device name
// "channel-<n>"; false for any other name or a number the driver does not
// have.
func ParseChannelDeviceName(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, channelPrefix)
	if !ok || digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || n > MaxIMEXChannel {
		return 0, false
	}
	return n, true
}

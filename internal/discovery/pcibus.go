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

package discovery

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// pciBusID returns the GPU's address in the canonical form Kubernetes
// and sysfs use, "0000:1b:00.0", from NVML's "00000000:1B:00.0".
func pciBusID(p nvml.PciInfo) (string, error) {
	raw := cString(p.BusId[:])
	if raw == "" {
		raw = cString(p.BusIdLegacy[:])
	}
	if raw == "" {
		return "", errors.New("NVML reports no PCI bus ID")
	}
	id, err := canonicalBusID(raw)
	if err != nil {
		return "", fmt.Errorf("PCI bus ID: %w", err)
	}
	return id, nil
}

// canonicalBusID parses "domain:bus:device.function" (hex, any case,
// domain of up to 8 digits) and prints it lower case with a 4-digit
// domain.
func canonicalBusID(raw string) (string, error) {
	parts := strings.Split(raw, ":")
	if len(parts) != 3 {
		return "", fmt.Errorf("%q is not domain:bus:device.function", raw)
	}
	dev, fn, ok := strings.Cut(parts[2], ".")
	if !ok {
		return "", fmt.Errorf("%q is not domain:bus:device.function", raw)
	}
	var v [4]uint64
	for i, f := range []struct {
		s    string
		bits int
	}{{parts[0], 32}, {parts[1], 8}, {dev, 5}, {fn, 3}} {
		n, err := strconv.ParseUint(f.s, 16, f.bits)
		if err != nil {
			return "", fmt.Errorf("%q is not domain:bus:device.function: %w", raw, err)
		}
		v[i] = n
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", v[0], v[1], v[2], v[3]), nil
}

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

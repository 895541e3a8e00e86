//go:build !linux

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
	"errors"

	"k8s.io/dynamic-resource-allocation/deviceattribute"
)

// topologyAttributes needs Linux's sysfs (deviceattribute reads it on
// Linux only). Slices are built from GPUs on Linux nodes; the CLI built for
// laptops (no cgo, no NVML) reads slices and builds none.
func topologyAttributes(busID, sysfsRoot string) ([]deviceattribute.DeviceAttribute, error) {
	return nil, errors.New("the PCI topology of a GPU is read from Linux's sysfs; this build is not for Linux")
}

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

package checkpoint

import (
	"fmt"
	"os"
	"strings"
)

// BootIDPath is where Linux publishes the current boot's random ID.
const BootIDPath = "/proc/sys/kernel/random/boot_id"

// BootID reads the boot ID from path; an empty path means the kernel's
// (BootIDPath), which is what a real node uses, and tests pass a file of
// their own. It changes on every reboot, which is how the plugin tells a
// restart of itself from a reboot of the node.
func BootID(path string) (string, error) {
	if path == "" {
		path = BootIDPath
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read boot ID: %w", err)
	}
	id := strings.TrimSpace(string(data))
	if id == "" {
		return "", fmt.Errorf("read boot ID: %s is empty", path)
	}
	return id, nil
}

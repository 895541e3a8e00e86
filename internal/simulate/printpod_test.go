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

package simulate

import (
	"slices"
	"testing"
)

// TestMountsByDir: the demo writes one line per target directory.
func TestMountsByDir(t *testing.T) {
	got := mountsByDir([]string{
		"/r/usr/lib/libcuda.so.1 -> /usr/lib/libcuda.so.1",
		"/r/usr/bin/nvidia-smi -> /usr/bin/nvidia-smi",
		"/r/usr/lib/libnvidia-ml.so.1 -> /usr/lib/libnvidia-ml.so.1",
		"/r/usr/lib/a.so -> /usr/lib/a.so",
		"/r/usr/lib/b.so -> /usr/lib/b.so",
	})
	want := []string{
		"/usr/lib/{libcuda.so.1, libnvidia-ml.so.1, a.so, …} (4 files from /r/usr/lib)",
		"/usr/bin/nvidia-smi (from /r/usr/bin)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("mountsByDir = %q, want %q", got, want)
	}
}

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

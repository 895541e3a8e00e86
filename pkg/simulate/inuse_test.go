package simulate

import (
	"context"
	"strings"
	"testing"
	"time"
)

// publishedNames returns the device names of the node's slices once they
// satisfy ok, or fails after a while.
func publishedNames(ctx context.Context, t *testing.T, c *Cluster, what string, ok func(map[string]bool) bool) map[string]bool {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		slices, err := c.Slices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				names[d.Name] = true
			}
		}
		if ok(names) {
			return names
		}
		if time.Now().After(deadline) {
			t.Fatalf("published devices never got to %s: %d devices", what, len(names))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hasPrefix(names map[string]bool, prefix string) bool {
	for n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// TestInUseHidesDevices: while a claim holds a GPU whole, its MIG
// placements are not published (nobody could be given one, but the
// scheduler would evaluate every one of them for every claim on the node),
// and while a claim holds a partition of a GPU, its whole device is not;
// each change is one ResourceSlice write, and unprepare brings the devices
// back. The scheduler (the real allocator) keeps placing claims.
func TestInUseHidesDevices(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	all := publishedNames(ctx, t, c, "everything", func(n map[string]bool) bool { return n["gpu-0"] && n["gpu-0-mig-1g10gb-0"] })
	time.Sleep(500 * time.Millisecond) // the controller's initial sync
	writes := countWrites(c.Client.Actions())

	whole, err := createAndRun(ctx, t, c, gpuClaim("whole", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	g := allocatedDevices(whole)[0]
	publishedNames(ctx, t, c, g+" without its placements", func(n map[string]bool) bool { return n[g] && !hasPrefix(n, g+"-mig-") })

	part, err := runClaim(ctx, t, c, migClaim("part", false, "1g.10gb"))
	if err != nil {
		t.Fatal(err)
	}
	p := allocatedDevices(part)[0]
	parent, _, _ := strings.Cut(p, "-mig-")
	if parent == g {
		t.Fatalf("the partition %s is on the GPU held whole", p)
	}
	publishedNames(ctx, t, c, parent+" without its whole device", func(n map[string]bool) bool { return !n[parent] && n[p] })
	time.Sleep(500 * time.Millisecond)
	if got := countWrites(c.Client.Actions()) - writes; got != 2 {
		t.Errorf("two prepares that change what is published issued %d ResourceSlice writes, want 2", got)
	}

	for _, res := range []*PodResult{whole, part} {
		if err := c.StopPod(ctx, res); err != nil {
			t.Fatal(err)
		}
	}
	back := publishedNames(ctx, t, c, "everything again", func(n map[string]bool) bool { return len(n) == len(all) })
	for n := range all {
		if !back[n] {
			t.Errorf("%s is not published after the unprepares", n)
		}
	}
}

package check

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpudra/gpudra/pkg/backend"
	"github.com/gpudra/gpudra/pkg/slicebuilder"
)

// ProfileInventory builds the ResourceSlices that gpudra's kubelet plugin
// publishes on nodes of a fake profile: for each node it opens the fake
// backend (in a temporary state directory), discovers the GPUs and calls the
// plugin's own slice builder, then turns each pool into ResourceSlices the
// way the ResourceSlice controller does. Nodes are named node-1 … node-N;
// the fake GPUs' UUIDs and PCI addresses are seeded by the node name, as on
// the plugin.
func ProfileInventory(ctx context.Context, profile string, nodes int, driverName string) ([]*resourceapi.ResourceSlice, error) {
	if nodes < 1 {
		return nil, fmt.Errorf("--nodes must be at least 1, got %d", nodes)
	}
	dir, err := os.MkdirTemp(scratchDir(), "gpudra-check-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// Nodes are independent (each has its own fake GPUs and state
	// directory); building them side by side hides the file system's
	// latency, which dominates.
	perNode := make([][]*resourceapi.ResourceSlice, nodes)
	errs := make([]error, nodes)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(nodes, 2*runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for i := range next {
				perNode[i], errs[i] = nodeInventory(ctx, profile, "node-"+strconv.Itoa(i+1), driverName, dir)
			}
		})
	}
	for i := range nodes {
		next <- i
	}
	close(next)
	wg.Wait()
	var out []*resourceapi.ResourceSlice
	for i := range nodes {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out = append(out, perNode[i]...)
	}
	return out, nil
}

// nodeInventory opens the fake backend for one node, discovers its GPUs
// and builds its slices, as the plugin does at start-up.
func nodeInventory(ctx context.Context, profile, nodeName, driverName, dir string) ([]*resourceapi.ResourceSlice, error) {
	stateDir := filepath.Join(dir, nodeName)
	defer func() { _ = os.RemoveAll(stateDir) }()
	be, err := backend.Open(ctx, backend.Options{
		Kind:         "fake",
		NodeName:     nodeName,
		FakeProfile:  profile,
		FakeStateDir: stateDir,
		DriverRoot:   "/",
	})
	if err != nil {
		return nil, err
	}
	var out []*resourceapi.ResourceSlice
	node, err := be.Discover(ctx)
	if err == nil {
		var res resourceslice.DriverResources
		res, err = slicebuilder.Build(node, slicebuilder.Options{DriverName: driverName, SysfsRoot: be.SysfsRoot()})
		if err == nil {
			out = PoolSlices(driverName, nodeName, res)
		}
	}
	if cerr := be.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("profile %s, %s: %w", profile, nodeName, err)
	}
	return out, nil
}

// scratchDir is where the fake nodes keep their throw-away state: a
// memory file system when there is one.
func scratchDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", ".gpudra-probe-"); err == nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

// PoolSlices turns the DriverResources of one node into the ResourceSlice
// objects the ResourceSlice controller (k8s.io/dynamic-resource-allocation/
// resourceslice) creates for them: one object per Slice, in order, owned by
// the node, with the pool's generation and slice count filled in.
func PoolSlices(driverName, nodeName string, res resourceslice.DriverResources) []*resourceapi.ResourceSlice {
	pools := make([]string, 0, len(res.Pools))
	for name := range res.Pools {
		pools = append(pools, name)
	}
	sort.Strings(pools)
	var out []*resourceapi.ResourceSlice
	for _, poolName := range pools {
		pool := res.Pools[poolName]
		for i, s := range pool.Slices {
			slice := &resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", nodeName, driverName, i)},
				Spec: resourceapi.ResourceSliceSpec{
					Driver: driverName,
					Pool: resourceapi.ResourcePool{
						Name:               poolName,
						Generation:         max(pool.Generation, 1),
						ResourceSliceCount: int64(len(pool.Slices)),
					},
					NodeSelector:           pool.NodeSelector,
					Devices:                s.Devices,
					SharedCounters:         s.SharedCounters,
					PerDeviceNodeSelection: s.PerDeviceNodeSelection,
					PartitionTypeAttribute: s.PartitionTypeAttribute,
					SkipNodeOperations:     s.SkipNodeOperations,
				},
			}
			switch {
			case pool.AllNodes:
				slice.Spec.AllNodes = new(true)
			case pool.NodeSelector == nil:
				slice.Spec.NodeName = new(nodeName)
			}
			out = append(out, slice)
		}
	}
	return out
}

// nodesOf returns the nodes the inventory names, sorted: every NodeName of
// a slice (and of a device with per-device node selection). An inventory
// whose slices all use node selectors or AllNodes gets one node, "node-1".
// Nodes carry the kubernetes.io/hostname label, as real ones do.
func nodesOf(slices []*resourceapi.ResourceSlice) []*v1.Node {
	names := map[string]bool{}
	for _, s := range slices {
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			names[*s.Spec.NodeName] = true
		}
		for _, d := range s.Spec.Devices {
			if d.NodeName != nil && *d.NodeName != "" {
				names[*d.NodeName] = true
			}
		}
	}
	if len(names) == 0 {
		names["node-1"] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Slice(sorted, func(i, j int) bool { return naturalLess(sorted[i], sorted[j]) })
	out := make([]*v1.Node, 0, len(sorted))
	for _, n := range sorted {
		out = append(out, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}})
	}
	return out
}

// naturalLess orders "node-2" before "node-10".
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da != "" && db != "" {
			if len(da) != len(db) {
				return len(da) < len(db)
			}
			if da != db {
				return da < db
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitsPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

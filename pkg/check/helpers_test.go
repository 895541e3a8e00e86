package check

import (
	"context"
	"fmt"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/pkg/fakenodes"
)

var inventories sync.Map // "profile/nodes" → *inventoryOnce

type inventoryOnce struct {
	once   sync.Once
	slices []*resourceapi.ResourceSlice
	err    error
}

// fakeInventory is what gpudra publishes on nodes fake nodes of a profile,
// built once per test binary: tests must not change it.
func fakeInventory(t testing.TB, profile string, nodes int) []*resourceapi.ResourceSlice {
	t.Helper()
	v, _ := inventories.LoadOrStore(fmt.Sprintf("%s/%d", profile, nodes), &inventoryOnce{})
	inv := v.(*inventoryOnce)
	inv.once.Do(func() {
		inv.slices, inv.err = fakenodes.Slices(context.Background(), profile, nodes, DefaultDriverName)
	})
	if inv.err != nil {
		t.Fatal(inv.err)
	}
	return inv.slices
}

// onProfile runs against nodes fake nodes of a profile ("" for none: the
// inputs' slices only).
func onProfile(t testing.TB, profile string, nodes int, o Options) Options {
	t.Helper()
	if profile != "" {
		o.Slices = fakeInventory(t, profile, nodes)
		o.SlicesSource = fmt.Sprintf("profile %s × %d node(s)", profile, nodes)
	}
	return o
}

package fleet

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/pkg/slicebuilder"
)

// DeviceID names one device: its pool (gpudra names pools after nodes) and
// its name in the pool.
type DeviceID struct {
	Pool   string
	Device string
}

// Device is one published device, reduced to what the accounting reads.
type Device struct {
	ID   DeviceID
	Node string
	// Model is the productName attribute ("NVIDIA H100 80GB HBM3").
	Model string
	// Type is slicebuilder.TypeGPU or slicebuilder.TypeMIG.
	Type string
	// Profile is the MIG profile of a partition ("1g.10gb"); "" for a
	// whole GPU.
	Profile string
	// UUID is a whole GPU's UUID; ParentUUID a partition's parent's.
	UUID, ParentUUID string
	// Tainted lists the effects of the device's taints.
	Taints []resourceapi.DeviceTaint
}

// inventory is the driver's published devices, by ID, in a stable order.
type inventory struct {
	devices []Device
	byID    map[DeviceID]int
	// schedulable are the nodes a new pod can be placed on.
	schedulable map[string]bool
}

// newInventory reads the newest generation of every pool of the driver.
func newInventory(driver string, sl []*resourceapi.ResourceSlice, nodes []*corev1.Node) inventory {
	newest := map[string]int64{}
	for _, s := range sl {
		if s.Spec.Driver == driver {
			newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
		}
	}
	inv := inventory{byID: map[DeviceID]int{}, schedulable: map[string]bool{}}
	domain := resourceapi.QualifiedName(driver + "/")
	attr := func(d resourceapi.Device, name resourceapi.QualifiedName) resourceapi.DeviceAttribute {
		if a, ok := d.Attributes[name]; ok {
			return a
		}
		return d.Attributes[domain+name]
	}
	str := func(a resourceapi.DeviceAttribute) string {
		if a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	for _, s := range sl {
		if s.Spec.Driver != driver || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		node := ""
		if s.Spec.NodeName != nil {
			node = *s.Spec.NodeName
		}
		for _, d := range s.Spec.Devices {
			dev := Device{
				ID:         DeviceID{Pool: s.Spec.Pool.Name, Device: d.Name},
				Node:       node,
				Model:      str(attr(d, slicebuilder.AttrProductName)),
				Type:       str(attr(d, slicebuilder.AttrType)),
				Profile:    str(attr(d, slicebuilder.AttrProfile)),
				UUID:       str(attr(d, slicebuilder.AttrUUID)),
				ParentUUID: str(attr(d, slicebuilder.AttrParentUUID)),
				Taints:     d.Taints,
			}
			if _, dup := inv.byID[dev.ID]; dup {
				continue
			}
			inv.byID[dev.ID] = len(inv.devices)
			inv.devices = append(inv.devices, dev)
		}
	}
	slices.SortFunc(inv.devices, func(a, b Device) int {
		return cmp.Or(cmp.Compare(a.ID.Pool, b.ID.Pool), cmp.Compare(a.ID.Device, b.ID.Device))
	})
	for i, d := range inv.devices {
		inv.byID[d.ID] = i
	}
	for _, n := range nodes {
		inv.schedulable[n.Name] = !n.Spec.Unschedulable && nodeReady(n)
	}
	return inv
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

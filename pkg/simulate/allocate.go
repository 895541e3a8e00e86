package simulate

import (
	"context"
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Features137 is the allocator feature set of a Kubernetes 1.37 scheduler
// with its default feature gates.
var Features137 = structured.Features{
	AdminAccess:            true,
	ConsumableCapacity:     true,
	DeviceBindingAndStatus: true,
	DeviceTaints:           true,
	PartitionableDevices:   true,
	PrioritizedList:        true,
}

// ErrUnschedulable means the allocator found no devices for the claim: a pod
// using it would stay Pending.
var ErrUnschedulable = errors.New("cannot allocate all claims on this node")

// classLister serves DeviceClasses from the fake API server.
type classLister struct{ c *Cluster }

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	list, err := l.c.Client.ResourceV1().DeviceClasses().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*resourceapi.DeviceClass, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	return l.c.Client.ResourceV1().DeviceClasses().Get(context.Background(), name, metav1.GetOptions{})
}

// ApplyDeviceClass creates or replaces a DeviceClass.
func (c *Cluster) ApplyDeviceClass(ctx context.Context, dc *resourceapi.DeviceClass) error {
	_, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = c.Client.ResourceV1().DeviceClasses().Update(ctx, dc, metav1.UpdateOptions{})
	}
	return err
}

// CreateClaim stores a claim in the fake API server, defaulted as the real
// one would.
func (c *Cluster) CreateClaim(ctx context.Context, claim *resourceapi.ResourceClaim) (*resourceapi.ResourceClaim, error) {
	claim = claim.DeepCopy()
	DefaultClaimSpec(&claim.Spec)
	return c.Client.ResourceV1().ResourceClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
}

// allocatedState collects the devices that allocated claims already hold.
func (c *Cluster) allocatedState(ctx context.Context) (structured.AllocatedState, error) {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	claims, err := c.Client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return state, err
	}
	for _, claim := range claims.Items {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			state.AllocatedDevices.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	return state, nil
}

// Allocate runs the real scheduler allocator for the claim on this node,
// against the published slices and the devices other claims hold, and
// records the result in the claim's status as the scheduler would. A claim
// that is already allocated is returned as is (a shared claim).
func (c *Cluster) Allocate(ctx context.Context, claim *resourceapi.ResourceClaim) (*resourceapi.ResourceClaim, error) {
	if claim.Status.Allocation != nil {
		return claim, nil
	}
	slices, err := c.Slices(ctx)
	if err != nil {
		return nil, err
	}
	state, err := c.allocatedState(ctx)
	if err != nil {
		return nil, err
	}
	allocator, err := structured.NewAllocator(ctx, Features137, state, classLister{c}, slices, cel.NewCache(100, cel.Features{}))
	if err != nil {
		return nil, fmt.Errorf("create allocator: %w", err)
	}
	results, err := allocator.Allocate(ctx, c.Node, []*resourceapi.ResourceClaim{claim})
	if err != nil {
		return nil, fmt.Errorf("allocate %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("allocate %s/%s: %w", claim.Namespace, claim.Name, ErrUnschedulable)
	}
	claim = claim.DeepCopy()
	claim.Status.Allocation = &results[0]
	return c.Client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
}

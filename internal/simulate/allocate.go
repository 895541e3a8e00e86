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
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpudra/gpudra/internal/scheduler"
)

// ErrUnschedulable means the allocator found no devices for the claims: a
// pod using them would stay Pending.
var ErrUnschedulable = scheduler.ErrUnschedulable

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
	scheduler.DefaultClaimSpec(&claim.Spec)
	return c.Client.ResourceV1().ResourceClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
}

// Scheduler is the offline scheduler core over what the fake API server
// holds: the plugin's published slices and the DeviceClasses, with the
// devices of every allocated claim held. It is what gpudra check uses, so
// that simulate and check allocate alike.
func (c *Cluster) Scheduler(ctx context.Context) (*scheduler.Scheduler, *scheduler.State, error) {
	slices, err := c.Slices(ctx)
	if err != nil {
		return nil, nil, err
	}
	classList, err := c.Client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	classes := make([]*resourceapi.DeviceClass, 0, len(classList.Items))
	for i := range classList.Items {
		classes = append(classes, &classList.Items[i])
	}
	claimList, err := c.Client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	claims := make([]*resourceapi.ResourceClaim, 0, len(claimList.Items))
	for i := range claimList.Items {
		claims = append(claims, &claimList.Items[i])
	}
	return scheduler.New(c.features, scheduler.NewClasses(classes), slices, nil), scheduler.StateOf(claims), nil
}

// Allocate allocates one claim as the scheduler would for a pod with only
// this claim (AllocatePod), and returns it as stored. A claim that is
// already allocated is returned as is (a shared claim).
func (c *Cluster) Allocate(ctx context.Context, claim *resourceapi.ResourceClaim) (*resourceapi.ResourceClaim, error) {
	out, err := c.AllocatePod(ctx, []*resourceapi.ResourceClaim{claim})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// AllocatePod does what the scheduler's DRA plugin does for a pod: it
// allocates the pod's unallocated claims together, on this node, against
// the published slices and the devices other claims hold (the offline
// scheduler core), and records the results in the claims' status. Claims
// already allocated (shared with another pod) must be on this node.
func (c *Cluster) AllocatePod(ctx context.Context, claims []*resourceapi.ResourceClaim) ([]*resourceapi.ResourceClaim, error) {
	sched, state, err := c.Scheduler(ctx)
	if err != nil {
		return nil, err
	}
	place, err := sched.Schedule(ctx, state, claims, nil)
	if err != nil {
		return nil, fmt.Errorf("allocate %s: %w", claimNames(claims), err)
	}
	if place.Node.Name != c.Node.Name {
		return nil, fmt.Errorf("allocate %s: the scheduler chose node %s, not %s", claimNames(claims), place.Node.Name, c.Node.Name)
	}
	out := make([]*resourceapi.ResourceClaim, len(claims))
	for i, claim := range claims {
		out[i] = claim
		res := place.Results[i]
		if res == nil {
			continue
		}
		claim = claim.DeepCopy()
		claim.Status.Allocation = res
		if out[i], err = c.Client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("record the allocation of %s/%s: %w", claim.Namespace, claim.Name, err)
		}
	}
	return out, nil
}

func claimNames(claims []*resourceapi.ResourceClaim) string {
	s := ""
	for i, c := range claims {
		if i > 0 {
			s += ", "
		}
		s += c.Namespace + "/" + c.Name
	}
	return s
}

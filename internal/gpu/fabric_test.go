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

package gpu

import "testing"

func TestNVLinkDomain(t *testing.T) {
	const cluster = "9f410827-0000-4000-8000-000000000001"
	tray := func(edit func(i int, f *Fabric)) Node {
		n := Node{}
		for i := range 4 {
			f := Fabric{State: FabricCompleted, Status: "SUCCESS", ClusterUUID: cluster, CliqueID: 32766, Health: FabricHealthy}
			if edit != nil {
				edit(i, &f)
			}
			n.GPUs = append(n.GPUs, GPU{Index: i, Minor: i, Fabric: f})
		}
		return n
	}
	onGPU := func(gpu int, edit func(f *Fabric)) func(int, *Fabric) {
		return func(i int, f *Fabric) {
			if i == gpu {
				edit(f)
			}
		}
	}
	for name, tc := range map[string]struct {
		node    Node
		want    NVLinkDomain
		message string
	}{
		"a tray of one domain": {
			node: tray(nil),
			want: NVLinkDomain{Fabric: true, Name: cluster + ".32766", ClusterUUID: cluster, CliqueID: 32766},
		},
		"limited capacity is still the domain": {
			node: tray(onGPU(1, func(f *Fabric) { f.Health = FabricLimitedCapacity })),
			want: NVLinkDomain{Fabric: true, Name: cluster + ".32766", ClusterUUID: cluster, CliqueID: 32766},
		},
		"a driver without a health summary": {
			node: tray(func(_ int, f *Fabric) { f.Health = "" }),
			want: NVLinkDomain{Fabric: true, Name: cluster + ".32766", ClusterUUID: cluster, CliqueID: 32766},
		},
		"upper-case UUID is the same domain": {
			node: tray(onGPU(3, func(f *Fabric) { f.ClusterUUID = "9F410827-0000-4000-8000-000000000001" })),
			want: NVLinkDomain{Fabric: true, Name: cluster + ".32766", ClusterUUID: cluster, CliqueID: 32766},
		},
		"a DGX H100: completed, zero cluster UUID": {
			node: tray(func(_ int, f *Fabric) { f.ClusterUUID, f.CliqueID, f.Health = ZeroClusterUUID, 0, "" }),
			want: NVLinkDomain{},
		},
		"an A100 or L4: no fabric": {
			node: tray(func(_ int, f *Fabric) { *f = Fabric{State: FabricNotSupported} }),
			want: NVLinkDomain{},
		},
		"no GPUs": {node: Node{}, want: NVLinkDomain{}},
		"unreadable on a node outside any fabric stays quiet": {
			node: tray(func(_ int, f *Fabric) { *f = Fabric{State: FabricUnknown, Status: "ERROR_UNKNOWN"} }),
			want: NVLinkDomain{},
		},
		"one GPU still probing": {
			node:    tray(onGPU(2, func(f *Fabric) { f.State = FabricInProgress })),
			want:    NVLinkDomain{Fabric: true, Reason: ReasonNotCompleted},
			message: "gpu-2: fabric state IN_PROGRESS",
		},
		"fabric manager not started: zero UUID everywhere": {
			node:    tray(func(_ int, f *Fabric) { f.State, f.ClusterUUID = FabricNotStarted, ZeroClusterUUID }),
			want:    NVLinkDomain{Fabric: true, Reason: ReasonNotCompleted},
			message: "gpu-0: fabric state NOT_STARTED",
		},
		"probe failed": {
			node:    tray(onGPU(1, func(f *Fabric) { f.Status = "ERROR_NVLINK_DOWN" })),
			want:    NVLinkDomain{Fabric: true, Reason: ReasonProbeFailed},
			message: "gpu-1: fabric probe failed: ERROR_NVLINK_DOWN",
		},
		"unhealthy": {
			node:    tray(onGPU(3, func(f *Fabric) { f.Health = FabricUnhealthy })),
			want:    NVLinkDomain{Fabric: true, Reason: ReasonUnhealthy},
			message: "gpu-3: fabric health UNHEALTHY",
		},
		"two cliques": {
			node:    tray(onGPU(2, func(f *Fabric) { f.CliqueID = 7 })),
			want:    NVLinkDomain{Fabric: true, Reason: ReasonCliquesDiffer},
			message: "gpu-2: in clique 7, gpu-0 in clique 32766",
		},
		"two clusters": {
			node:    tray(onGPU(1, func(f *Fabric) { f.ClusterUUID = "00000001-0000-0000-0000-000000000001" })),
			want:    NVLinkDomain{Fabric: true, Reason: ReasonClustersDiffer},
			message: "gpu-1: in NVLink cluster 00000001-0000-0000-0000-000000000001, gpu-0 in " + cluster,
		},
		"one GPU with a zero cluster UUID": {
			node:    tray(onGPU(0, func(f *Fabric) { f.ClusterUUID = ZeroClusterUUID })),
			want:    NVLinkDomain{Fabric: true, Reason: ReasonNoClusterUUID},
			message: "gpu-0: no NVLink cluster UUID, unlike the node's other GPUs",
		},
		"one GPU without fabric info": {
			node:    tray(onGPU(3, func(f *Fabric) { *f = Fabric{State: FabricNotSupported} })),
			want:    NVLinkDomain{Fabric: true, Reason: ReasonNotEveryGPU},
			message: "gpu-3: reports no NVLink fabric, unlike the node's other GPUs",
		},
		"one GPU unreadable": {
			node:    tray(onGPU(1, func(f *Fabric) { *f = Fabric{State: FabricUnknown, Status: "ERROR_UNKNOWN"} })),
			want:    NVLinkDomain{Fabric: true, Reason: ReasonFabricUnknown},
			message: "gpu-1: fabric info unreadable: ERROR_UNKNOWN",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := tc.node.NVLinkDomain()
			tc.want.Message = tc.message
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if got.InDomain() != (tc.want.Name != "") {
				t.Errorf("InDomain() = %v", got.InDomain())
			}
		})
	}
}

func TestNVLinkDomainDescribe(t *testing.T) {
	for _, tc := range []struct {
		d    NVLinkDomain
		want string
	}{
		{NVLinkDomain{}, "no multi-node NVLink fabric"},
		{NVLinkDomain{Fabric: true, Name: "u.2"}, "NVLink domain u.2"},
		{NVLinkDomain{Fabric: true, Reason: ReasonUnhealthy, Message: "gpu-3: fabric health UNHEALTHY"}, "in a multi-node NVLink fabric, in no NVLink domain: gpu-3: fabric health UNHEALTHY"},
	} {
		if got := tc.d.Describe(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.d, got, tc.want)
		}
	}
}

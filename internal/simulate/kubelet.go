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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	resourceapi "k8s.io/api/resource/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// kubelet stands in for the kubelet's DRA client: it talks to the plugin's
// DRA socket with the same gRPC API.
type kubelet struct {
	conn   *grpc.ClientConn
	client drapb.DRAPluginClient
}

func dialKubelet(socket string) (*kubelet, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial DRA socket %s: %w", socket, err)
	}
	return &kubelet{conn: conn, client: drapb.NewDRAPluginClient(conn)}, nil
}

func (k *kubelet) close() { _ = k.conn.Close() }

func claimsOf(claims []*resourceapi.ResourceClaim) []*drapb.Claim {
	out := make([]*drapb.Claim, 0, len(claims))
	for _, c := range claims {
		out = append(out, &drapb.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)})
	}
	return out
}

// NodePrepareResources calls the plugin over its socket, as the kubelet
// does before starting a pod's containers.
func (c *Cluster) NodePrepareResources(ctx context.Context, claims ...*resourceapi.ResourceClaim) (*drapb.NodePrepareResourcesResponse, error) {
	return c.kubelet.client.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: claimsOf(claims)})
}

// NodeUnprepareResources calls the plugin over its socket, as the kubelet
// does after a pod's last container stopped.
func (c *Cluster) NodeUnprepareResources(ctx context.Context, claims ...*resourceapi.ResourceClaim) (*drapb.NodeUnprepareResourcesResponse, error) {
	return c.kubelet.client.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: claimsOf(claims)})
}

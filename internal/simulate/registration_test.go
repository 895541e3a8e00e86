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
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TestRegistration: the kubelet's plugin watcher finds the registration
// socket, learns the driver name, the DRA socket and the services, and its
// registration status reaches the plugin.
func TestRegistration(t *testing.T) {
	ctx, c := startCluster(t, "dgx-h100")
	sock := filepath.Join(c.Opts.RegistrarDir(), c.Opts.DriverName+"-reg.sock")
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	info, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo over %s: %v", sock, err)
	}
	if info.Type != registerapi.DRAPlugin || info.Name != "gpu.gpudra.io" {
		t.Errorf("registered as %s %q, want %s gpu.gpudra.io", info.Type, info.Name, registerapi.DRAPlugin)
	}
	if want := filepath.Join(c.Opts.PluginDataDir(), "dra.sock"); info.Endpoint != want {
		t.Errorf("DRA endpoint %q, want %q", info.Endpoint, want)
	}
	for _, svc := range []string{"v1.DRAPlugin", "v1.DRAResourceHealth"} {
		if !slices.Contains(info.SupportedVersions, svc) {
			t.Errorf("supported services %v lack %s", info.SupportedVersions, svc)
		}
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
}

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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/gpudra/gpudra/internal/gpudratest"
	"github.com/gpudra/gpudra/internal/plugin"
)

// TestLivenessWhenFilesVanish: the plugin notices when the kubelet can no
// longer reach it (its DRA socket, its registration socket or its whole
// data directory deleted under it), fails its liveness check and exits so
// that it is restarted. (Before, it ran on serving nobody: new kubelet
// connections failed, and nothing noticed or restarted it.)
func TestLivenessWhenFilesVanish(t *testing.T) {
	tests := []struct {
		name    string
		remove  func(o Options) string
		wantMsg string
	}{
		{name: "DRA socket", remove: func(o Options) string { return filepath.Join(o.PluginDataDir(), "dra.sock") }, wantMsg: "dra.sock is gone"},
		{name: "registration socket", remove: func(o Options) string { return filepath.Join(o.RegistrarDir(), "gpu.gpudra.io-reg.sock") }, wantMsg: "gpu.gpudra.io-reg.sock is gone"},
		{name: "plugin data directory", remove: func(o Options) string { return o.PluginDataDir() }, wantMsg: "plugin data directory " + "%s is gone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var mu sync.Mutex
			var fatal []error
			c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), Healthcheck: true, FileWatchInterval: 50 * time.Millisecond,
				Fatal: func(err error) { mu.Lock(); defer mu.Unlock(); fatal = append(fatal, err) }}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Stop()
			health := healthClient(t, c.Driver.HealthcheckAddr())
			for _, svc := range []string{"", plugin.LivenessService} {
				if got := check(ctx, t, health, svc); got != grpc_health_v1.HealthCheckResponse_SERVING {
					t.Fatalf("%q before: %v, want SERVING", svc, got)
				}
			}
			// Ready once the kubelet has registered the plugin.
			if got := check(ctx, t, health, plugin.ReadinessService); got != grpc_health_v1.HealthCheckResponse_NOT_SERVING {
				t.Errorf("readiness before registration: %v, want NOT_SERVING", got)
			}
			registerLikeKubelet(ctx, t, c)
			// And once the API server holds its slices, which the
			// ResourceSlice controller writes in the background.
			var got grpc_health_v1.HealthCheckResponse_ServingStatus
			_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				got = check(ctx, t, health, plugin.ReadinessService)
				return got == grpc_health_v1.HealthCheckResponse_SERVING, nil
			})
			if got != grpc_health_v1.HealthCheckResponse_SERVING {
				t.Errorf("readiness after registration and publishing: %v, want SERVING", got)
			}

			path := tc.remove(c.Opts)
			if err := os.RemoveAll(path); err != nil {
				t.Fatal(err)
			}
			for _, svc := range []string{plugin.LivenessService, plugin.ReadinessService} {
				if got := check(ctx, t, health, svc); got != grpc_health_v1.HealthCheckResponse_NOT_SERVING {
					t.Errorf("%s after %s was removed: %v, want NOT_SERVING", svc, path, got)
				}
			}
			want := strings.Replace(tc.wantMsg, "%s", c.Opts.PluginDataDir(), 1)
			var msg string
			if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				mu.Lock()
				defer mu.Unlock()
				if len(fatal) == 0 {
					return false, nil
				}
				msg = fatal[0].Error()
				return true, nil
			}); err != nil {
				t.Fatalf("the plugin did not notice that %s was removed", path)
			}
			if !strings.Contains(msg, want) {
				t.Errorf("fatal error %q does not say %q", msg, want)
			}
		})
	}
}

func healthClient(t *testing.T, addr string) grpc_health_v1.HealthClient {
	t.Helper()
	if addr == "" {
		t.Fatal("no health service")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return grpc_health_v1.NewHealthClient(conn)
}

func check(ctx context.Context, t *testing.T, c grpc_health_v1.HealthClient, service string) grpc_health_v1.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("Check(%q): %v", service, err)
	}
	return resp.GetStatus()
}

// registerLikeKubelet does what the kubelet's plugin watcher does with a
// new registration socket.
func registerLikeKubelet(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(c.Opts.RegistrarDir(), c.Opts.DriverName+"-reg.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reg := registerapi.NewRegistrationClient(conn)
	if _, err := reg.GetInfo(ctx, &registerapi.InfoRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
}

// TestDeletedSpecIsRewritten: a prepared claim's CDI spec deleted under the
// running plugin (a cleanup job, an admin) is back within the watch
// interval, so that a restarted container of the pod still gets its GPU.
func TestDeletedSpecIsRewritten(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, err := Start(ctx, Options{Dir: gpudratest.ShortTempDir(t), FileWatchInterval: 50 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	applyClasses(ctx, t, c)
	if _, err := createAndRun(ctx, t, c, gpuClaim("kept", 1, "")); err != nil {
		t.Fatal(err)
	}
	specs := cdiSpecs(t, c)
	if len(specs) != 1 {
		t.Fatalf("specs %v, want one", specs)
	}
	path := filepath.Join(c.Opts.CDIDir(), specs[0])
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	var got []byte
	var readErr error
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, readErr = os.ReadFile(path)
		return readErr == nil, nil
	}); err != nil {
		t.Fatalf("the deleted spec was not rewritten: %v", readErr)
	}
	if string(got) != string(want) {
		t.Errorf("rewritten spec differs:\n%s\nwant\n%s", got, want)
	}
}

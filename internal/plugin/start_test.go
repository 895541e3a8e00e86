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

package plugin

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/backend"
)

// startConfig is a plugin on a fake DGX H100 in a fresh directory, with
// its backend opened.
func startConfig(t *testing.T) Config {
	t.Helper()
	return startConfigProfile(t, "dgx-h100")
}

// startConfigProfile is startConfig on another fake profile (a name or a
// profile file).
func startConfigProfile(t testing.TB, profile string) Config {
	t.Helper()
	// Unix socket paths are short: not t.TempDir's.
	dir, err := os.MkdirTemp("", "gpudra-start-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// The kubelet's registration directory is there before the plugin.
	if err := os.MkdirAll(filepath.Join(dir, "plugins_registry"), 0o755); err != nil {
		t.Fatal(err)
	}
	bootID := filepath.Join(dir, "boot_id")
	if err := os.WriteFile(bootID, []byte("boot-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	be, err := backend.Open(ctx, backend.Options{Kind: "fake", NodeName: "node-1", FakeProfile: profile,
		FakeStateDir: filepath.Join(dir, "fake-gpus"), DriverRoot: "/"})
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		DriverName:    "gpu.gpudra.io",
		NodeName:      "node-1",
		KubeClient:    client,
		Backend:       be,
		PluginDataDir: filepath.Join(dir, "plugins", "gpu.gpudra.io"),
		RegistrarDir:  filepath.Join(dir, "plugins_registry"),
		CDIDir:        filepath.Join(dir, "cdi"),
		BootIDPath:    bootID,
	}
}

// A start-up that fails, early or late, leaves nothing behind and closes
// the NVML backend exactly once: Start owns it, its caller must not close
// it again (it used to be closed twice when start-up failed after
// serving the kubelet: by Start's cleanup, then by its caller).
func TestStartFailureReleasesEverythingOnce(t *testing.T) {
	tests := []struct {
		name string
		// breakIt makes the step fail.
		breakIt func(t *testing.T, cfg *Config)
		want    string
		// upstreamLeavesSocket: kubeletplugin.Start (v0.37.2) leaves its
		// DRA gRPC server serving when registration fails: it arranges to
		// stop the server only once the registrar has started. The
		// process exits on a failed start, which ends it.
		upstreamLeavesSocket bool
	}{
		{"CDI spec dir", func(t *testing.T, cfg *Config) {
			if err := os.WriteFile(cfg.CDIDir, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "CDI spec dir", false},
		{"kubelet registration", func(t *testing.T, cfg *Config) {
			if err := os.RemoveAll(cfg.RegistrarDir); err != nil {
				t.Fatal(err)
			}
		}, "start kubelet plugin", true},
		{"health service, the last step", func(t *testing.T, cfg *Config) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = taken.Close() })
			cfg.HealthcheckAddr = taken.Addr().String()
		}, "listen for the health service", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			cfg := startConfig(t)
			tc.breakIt(t, &cfg)
			d, err := Start(ctx, cfg)
			if err == nil {
				d.Stop()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start: %v, want an error about %q", err, tc.want)
			}
			if errors.Is(err, backend.ErrClosed) {
				t.Errorf("Start closed the backend twice: %v", err)
			}
			if err := cfg.Backend.Close(); !errors.Is(err, backend.ErrClosed) {
				t.Errorf("the backend was still open after Start failed (Close: %v): Start owns it", err)
			}
			// The kubelet must not find the socket of a plugin that is not
			// there.
			draSocket, _ := socketPaths(cfg)
			if _, err := os.Stat(draSocket); !tc.upstreamLeavesSocket && !os.IsNotExist(err) {
				t.Errorf("DRA socket %s left behind: %v", draSocket, err)
			}
		})
	}
}

// Stop closes the backend, once, however often it is called.
func TestStopClosesBackendOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cfg := startConfig(t)
	d, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := d.stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
	if err := cfg.Backend.Close(); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("the backend was still open after Stop (Close: %v)", err)
	}
}

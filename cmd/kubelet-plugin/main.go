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

// Command gpudra-kubelet-plugin is gpudra's node agent: it publishes the
// node's GPUs as ResourceSlices and prepares allocated GPUs for pods through
// CDI. Run it as a DaemonSet (see deployments/helm/gpudra).
package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/componentmetrics"
	"github.com/gpudra/gpudra/internal/mps"
	"github.com/gpudra/gpudra/internal/mpspod"
	"github.com/gpudra/gpudra/internal/plugin"
	gpudraversion "github.com/gpudra/gpudra/internal/version"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gpudra-kubelet-plugin:", err)
		os.Exit(gpudraversion.ExitCode(err)) // 2: a bad command line
	}
}

// description is what --help says first.
const description = `gpudra-kubelet-plugin is the node agent of gpudra, a Kubernetes DRA driver for
NVIDIA GPUs. It publishes the node's GPUs and their MIG placements as
ResourceSlices, and prepares the devices the scheduler allocated to a pod's
claims (whole GPUs, MIG partitions created on demand, MPS or time-sliced
shares) and hands them to the containers through CDI, keeping a checkpoint
so that a restart or an upgrade finishes or rolls back what it began. Run it
as the Helm chart's DaemonSet (deployments/helm/gpudra).

A flag whose help names an environment variable can also be set through it
(the chart does so); the command line wins, and an empty variable counts as
unset.
Exit status: 0 when stopped (SIGTERM, SIGINT) or after --help, --version and
--install-cdi-hook; 2 for a bad command line or environment (an unknown flag,
a value that does not parse or cannot be used, --node-name missing); 1 for a
failure at run time.`

func run(args []string) error {
	f, cmd := newFlags()
	if exit, err := cmd.Parse(args); exit || err != nil {
		return err
	}
	defer logs.FlushLogs()
	if f.installCDIHook != "" {
		return installCDIHook(f.installCDIHook)
	}
	cfg, err := f.pluginConfig()
	if err != nil {
		return err
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	logger := klog.LoggerWithValues(klog.Background(), "node", f.nodeName)
	ctx = klog.NewContext(ctx, logger)

	// /metrics answers from here on: not ready until the plugin has
	// started, so that a start-up that hangs or fails shows in
	// gpudra_plugin_ready (and one that crash-loops in the scrape's up).
	cfg.Instruments = plugin.NewInstruments(f.nodeName)
	if f.metricsAddr != "" {
		srv, err := serveMetrics(f.metricsAddr, cfg.Instruments.Registry())
		if err != nil {
			return err
		}
		defer func() { _ = srv.Close() }()
	}

	if cfg.KubeClient, err = cmd.KubeClient(f.kubeconfig); err != nil {
		return err
	}
	if cfg.MPS, err = mpsLauncher(ctx, f, cfg.KubeClient); err != nil {
		return err
	}
	// The backend is opened last: plugin.Start owns it from here on, and
	// closes it whether it fails or, through Stop, after it ran.
	if cfg.Backend, err = f.openBackend(ctx); err != nil {
		return err
	}
	var fatal error
	cfg.Fatal = func(err error) {
		fatal = err
		cancel()
	}
	driver, err := plugin.Start(ctx, cfg)
	if err != nil {
		return err
	}
	logger.Info("gpudra kubelet plugin running", "driver", f.driverName, "backend", f.deviceBackend)
	<-ctx.Done()
	// Stop removes the sockets, so the kubelet stops calling a dead plugin.
	driver.Stop()
	return fatal
}

// openBackend opens where the GPUs come from, as the flags say.
func (f *flags) openBackend(ctx context.Context) (*backend.Backend, error) {
	be, err := backend.Open(ctx, backend.Options{
		Kind:           f.deviceBackend,
		NodeName:       f.nodeName,
		FakeProfile:    f.fakeProfile,
		FakeStateDir:   f.fakeStateDir,
		DriverRoot:     f.driverRoot,
		HostDriverRoot: f.hostDriverRoot,
		CDIHookPath:    f.cdiHookPath,
	})
	if err != nil {
		return nil, fmt.Errorf("--device-backend=%s (with --fake-profile, --fake-state-dir or --driver-root): %w", f.deviceBackend, err)
	}
	return be, nil
}

// mpsLauncher runs MPS daemons as pods on this node, or returns nil (MPS
// refused) when the plugin does not know its image or namespace.
func mpsLauncher(ctx context.Context, f *flags, client kubernetes.Interface) (mps.Launcher, error) {
	if f.mpsImage == "" || f.namespace == "" {
		klog.FromContext(ctx).Info("MPS is not available: --mps-daemon-image and --namespace are needed to run MPS daemon pods")
		return nil, nil
	}
	l, err := mpspod.New(mpspod.Config{
		Client:            client,
		Namespace:         f.namespace,
		NodeName:          f.nodeName,
		DriverName:        f.driverName,
		Image:             f.mpsImage,
		PullPolicy:        v1.PullPolicy(f.mpsPullPolicy),
		ImagePullSecrets:  f.mpsPullSecrets,
		PriorityClassName: "system-node-critical",
		// Empty means the driver root is at the same path on the host.
		HostDriverRoot: cmp.Or(f.hostDriverRoot, f.driverRoot),
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// serveMetrics serves /metrics on addr until the returned server is closed.
func serveMetrics(addr string, reg *prometheus.Registry) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", componentmetrics.Handler("kubelet-plugin", reg))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}

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
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// The kubelet reaches the plugin only through two unix sockets: the
// registration socket in its plugins_registry directory and the DRA socket
// in the plugin data directory. If either file goes (the data directory
// deleted under a running plugin, a cleanup script), the process keeps
// running and serving nothing: new kubelet connections fail and nothing
// would restart it. So the plugin watches the files, and its gRPC health
// service (grpc.health.v1, which Kubernetes probes natively) answers:
//
//   - "liveness" (and ""): the data directory is the one the plugin started
//     with, both sockets are there, and a call through each, by path, as the
//     kubelet makes it, succeeds. A hung gRPC server fails it too.
//   - "readiness": liveness, and the kubelet has registered the plugin, and
//     the API server holds the ResourceSlices as the plugin built them
//     (ready.go).
//
// When the watch finds a file gone, the plugin also exits at once (Fatal):
// nothing in the process can bring a socket file back, and a restarted
// container serves again without waiting for the probe's failure
// threshold.

// Service names of the health service.
const (
	LivenessService  = "liveness"
	ReadinessService = "readiness"
)

// fileWatchInterval is how often the socket and data directory are
// checked.
const fileWatchInterval = 5 * time.Second

// endpoints are the files the kubelet reaches the plugin through, as they
// were when the plugin started serving.
type endpoints struct {
	dataDir, draSocket, regSocket string
	dataDirID                     fileID
}

// fileID identifies a file independently of its path: a directory deleted
// and made again, or a mount that went away and uncovered the directory
// beneath, has another.
type fileID struct{ dev, ino uint64 }

func statID(path string) (fileID, os.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, fi, nil
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, fi, nil
}

// socketPaths are the DRA and registration socket paths the helper is told
// to use: computed here so that the health checks and the helper agree.
func socketPaths(cfg Config) (draSocket, regSocket string) {
	dra := "dra.sock"
	reg := cfg.DriverName + "-reg.sock"
	if cfg.RollingUpdateUID != "" {
		dra = "dra-" + string(cfg.RollingUpdateUID) + ".sock"
		reg = kubeletplugin.RollingUpdateRegistrarSocketFile(cfg.RegistrarDir, cfg.DriverName, cfg.RollingUpdateUID)
	}
	return filepath.Join(cfg.PluginDataDir, dra), filepath.Join(cfg.RegistrarDir, reg)
}

// filesProblem says what is wrong with the files, or nil.
func (e endpoints) filesProblem() error {
	id, _, err := statID(e.dataDir)
	switch {
	case err != nil:
		return fmt.Errorf("plugin data directory %s is gone: %w", e.dataDir, err)
	case id != e.dataDirID:
		return fmt.Errorf("plugin data directory %s was deleted or replaced since the plugin started (the kubelet cannot reach the sockets in the old one)", e.dataDir)
	}
	for _, sock := range []string{e.draSocket, e.regSocket} {
		_, fi, err := statID(sock)
		if err != nil {
			return fmt.Errorf("socket %s is gone: %w", sock, err)
		}
		if fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("%s is no longer a socket", sock)
		}
	}
	return nil
}

// healthServer is the grpc.health.v1 service.
type healthServer struct {
	grpc_health_v1.UnimplementedHealthServer
	d *Driver

	// mu guards draConn and regConn, dialled on the first check.
	mu      sync.Mutex
	draConn *grpc.ClientConn
	regConn *grpc.ClientConn
	// server and listener are set when made; only read after.
	server   *grpc.Server
	listener net.Listener
	// done is closed by the serving goroutine when Serve returns.
	done chan struct{}
}

// startHealthcheck serves the health service on cfg.HealthcheckAddr and
// watches the files.
func (d *Driver) startHealthcheck(ctx context.Context) error {
	if d.cfg.HealthcheckAddr == "" {
		return nil
	}
	lis, err := net.Listen("tcp", d.cfg.HealthcheckAddr)
	if err != nil {
		return fmt.Errorf("listen for the health service on %s: %w", d.cfg.HealthcheckAddr, err)
	}
	h := &healthServer{d: d, listener: lis, server: grpc.NewServer(), done: make(chan struct{})}
	grpc_health_v1.RegisterHealthServer(h.server, h)
	d.healthcheck = h
	logger := klog.FromContext(ctx)
	go func() {
		defer close(h.done)
		if err := h.server.Serve(lis); err != nil {
			logger.Error(err, "Health service stopped", "addr", lis.Addr().String())
		}
	}()
	logger.Info("Serving gRPC health checks", "addr", lis.Addr().String(), "services", []string{LivenessService, ReadinessService})
	return nil
}

func (h *healthServer) stop() {
	h.server.Stop()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range []*grpc.ClientConn{h.draConn, h.regConn} {
		if c != nil {
			_ = c.Close()
		}
	}
}

// HealthcheckAddr is where the health service listens ("" when off).
func (d *Driver) HealthcheckAddr() string {
	if d.healthcheck == nil {
		return ""
	}
	return d.healthcheck.listener.Addr().String()
}

// Check implements grpc_health_v1.HealthServer.
func (h *healthServer) Check(ctx context.Context, req *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	var err error
	switch req.GetService() {
	case "", LivenessService:
		err = h.alive(ctx)
	case ReadinessService:
		err = h.ready(ctx)
	default:
		return nil, status.Errorf(codes.NotFound, "unknown service %q; this plugin serves %q and %q", req.GetService(), LivenessService, ReadinessService)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Health check failed", "service", req.GetService())
		return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_NOT_SERVING}, nil
	}
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

// alive checks the files and calls each socket the way the kubelet does.
func (h *healthServer) alive(ctx context.Context) error {
	if err := h.d.endpoints.filesProblem(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reg, dra, err := h.clients()
	if err != nil {
		return err
	}
	if _, err := reg.GetInfo(ctx, &registerapi.InfoRequest{}); err != nil {
		return fmt.Errorf("registration socket %s does not answer: %w", h.d.endpoints.regSocket, err)
	}
	// An empty request prepares nothing and exercises the whole gRPC path.
	if _, err := dra.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{}); err != nil {
		return fmt.Errorf("DRA socket %s does not answer: %w", h.d.endpoints.draSocket, err)
	}
	return nil
}

// ready is alive, and Ready: the kubelet registered the plugin and its
// ResourceSlices are published as built.
func (h *healthServer) ready(ctx context.Context) error {
	if err := h.alive(ctx); err != nil {
		return err
	}
	return h.d.Ready()
}

// clients dials both sockets once, by path: a connection re-resolves the
// path when it reconnects, so a socket file that is gone fails the call.
func (h *healthServer) clients() (registerapi.RegistrationClient, drapb.DRAPluginClient, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.regConn == nil {
		c, err := grpc.NewClient("unix://"+h.d.endpoints.regSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, fmt.Errorf("connect to registration socket: %w", err)
		}
		h.regConn = c
	}
	if h.draConn == nil {
		c, err := grpc.NewClient("unix://"+h.d.endpoints.draSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, fmt.Errorf("connect to DRA socket: %w", err)
		}
		h.draConn = c
	}
	return registerapi.NewRegistrationClient(h.regConn), drapb.NewDRAPluginClient(h.draConn), nil
}

// watchFiles checks the sockets and the data directory every
// FileWatchInterval and ends the plugin (Fatal) when they are gone; while
// they are there, it rewrites the CDI specs of prepared claims that were
// deleted.
func (d *Driver) watchFiles(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, d.cfg.FileWatchInterval, false, func(ctx context.Context) (done bool, _ error) {
		err := d.endpoints.filesProblem()
		if err == nil {
			d.ensureSpecs(ctx)
			return false, nil
		}
		if ctx.Err() == nil { // else Stop removed the sockets itself
			d.cfg.Fatal(fmt.Errorf("the kubelet can no longer reach the plugin, exiting so that it is restarted: %w", err))
		}
		return true, nil
	})
}

// ensureSpecs rewrites deleted CDI specs of prepared claims: a running
// pod's container that restarts needs its claim's spec again.
func (d *Driver) ensureSpecs(ctx context.Context) {
	logger := klog.FromContext(ctx)
	rewritten, err := d.state.EnsureSpecs(ctx)
	if err != nil {
		logger.Error(err, "Checking the CDI specs of prepared claims")
	}
	if len(rewritten) > 0 {
		logger.Info("Rewrote deleted CDI specs of prepared claims", "claimUIDs", rewritten)
	}
}

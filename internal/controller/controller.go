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

package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/admission"
	"github.com/gpudra/gpudra/internal/componentmetrics"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/migspares"
	"github.com/gpudra/gpudra/internal/nvlinkpools"
	"github.com/gpudra/gpudra/internal/servingcert"
)

// Config is everything the controller needs; cmd/controller fills it from
// flags.
type Config struct {
	DriverName string
	Client     kubernetes.Interface
	// Namespace is the controller's own: its Lease and certificate
	// Secret live there.
	Namespace string
	// Identity names this replica in the Lease (the pod name).
	Identity string

	// LeaseName is the leader election Lease; empty turns leader
	// election off (one replica only). LeaseDuration, RenewDeadline and
	// RetryPeriod are client-go's leader election timing (0: the
	// Default* constants).
	LeaseName     string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration

	// MetricsListener serves /metrics, /healthz and /readyz over HTTP.
	MetricsListener net.Listener
	// WebhookListener serves the admission webhook over HTTPS; nil turns
	// the webhook off.
	WebhookListener net.Listener
	// FleetAccounting runs the fleet accounting on the leader. Off, the
	// leader only renews the webhook's certificate: a replica that serves
	// the webhook alone holds no informers, and its memory does not grow
	// with the fleet.
	FleetAccounting bool
	// WebhookLimits bound the time and memory reviews take
	// (admission.DefaultLimits unless set).
	WebhookLimits admission.Limits
	// Certificates is where the webhook's certificate comes from: a
	// *servingcert.Manager (self-managed) or a *servingcert.FileSource
	// (cert-manager).
	Certificates CertificateSource
	// CertReload is how often every replica re-reads its certificate;
	// CertRotate how often the leader checks whether one is due (0:
	// DefaultCertReload, DefaultCertRotate).
	CertReload, CertRotate time.Duration

	// MigSpareNodes is the fleet's budget of nodes that keep a spare GPU's
	// MIG placements published, for the plugins in fleet mode
	// (--mig-spare-gpus=fleet); the zero value keeps none. It needs
	// FleetAccounting.
	MigSpareNodes migspares.Target
	// MigSpareFollowDemand raises each node pool's target above
	// MigSpareNodes' share as its recent claims turn to partitions
	// (migspares.Demand).
	MigSpareFollowDemand bool
	// MigSparePoolLabels name a node's pool (fleet.NodePool); nil: one
	// pool.
	MigSparePoolLabels []string
	// MigSparesConfigMap is the ConfigMap in Namespace the assignment is
	// written into (empty: DefaultMigSparesConfigMap).
	MigSparesConfigMap string

	// NVLinkChannels is how many exclusive IMEX channels each NVLink
	// domain's pool holds (package nvlinkpools); 0 turns the domain labels
	// and channel pools off. Like the spares, it runs on the leader of the
	// replicas with FleetAccounting: the webhook's replicas hold no
	// informers and no rights to write.
	NVLinkChannels int

	// RecomputeInterval is the least time between two fleet recomputes
	// (0: DefaultRecomputeInterval).
	RecomputeInterval time.Duration
	// ResyncPeriod re-delivers every object to the informers' handlers.
	ResyncPeriod time.Duration
}

// The defaults of Config's fields, which gpudra-controller's flags show and
// use too.
const (
	DefaultLeaseDuration     = 15 * time.Second
	DefaultRenewDeadline     = 10 * time.Second
	DefaultRetryPeriod       = 2 * time.Second
	DefaultCertReload        = 30 * time.Second
	DefaultCertRotate        = 10 * time.Minute
	DefaultRecomputeInterval = 10 * time.Second
)

// CertificateSource serves the webhook's certificate.
type CertificateSource interface {
	// Load (re-)reads the certificate from where it is kept.
	Load(ctx context.Context) error
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	Ready() bool
}

// rotator is what a self-managed source also does, on the leader.
type rotator interface {
	Rotate(ctx context.Context) error
}

var (
	_ CertificateSource = (*servingcert.Manager)(nil)
	_ CertificateSource = (*servingcert.FileSource)(nil)
	_ rotator           = (*servingcert.Manager)(nil)
)

// server is what Run serves: the metrics over HTTP, the webhook over
// HTTPS.
type server interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// ErrLostLeadership is returned by Run when this replica stops being the
// leader; the process should exit so that it restarts clean.
var ErrLostLeadership = errors.New("lost the leader lease")

// Run serves until ctx is done or leadership is lost: the metrics and
// probes, the webhook when it is on, and on the leader the fleet
// accounting and the certificate's renewal. What it starts, one deferred
// cleanup stops, in order: the leader's work and the elector (which gives
// the lease up), then the servers.
func Run(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	cfg.setDefaults()
	if !cfg.FleetAccounting && cfg.WebhookListener == nil {
		return errors.New("neither the fleet accounting nor the webhook is on: nothing to do")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var srv *servers
	var elected chan struct{} // closed when the elector has returned
	defer func() {
		cancel(nil)
		if elected != nil {
			// With ReleaseOnCancel the elector gives the lease up, so
			// another replica leads at once instead of after the lease
			// expires: wait for it, a while.
			select {
			case <-elected:
			case <-time.After(cfg.RenewDeadline):
			}
		}
		if srv != nil {
			srv.shutdown()
		}
	}()
	m := newMetrics(cfg.FleetAccounting, cfg.WebhookListener != nil)
	if cfg.FleetAccounting && !cfg.MigSpareNodes.Off() {
		m.registerSpares()
	}
	// leading is the leader's work; an error that is not the end of ctx
	// ends Run.
	leading := func(ctx context.Context) {
		m.leader.Set(1)
		if err := lead(ctx, cfg, m); err != nil && ctx.Err() == nil {
			cancel(err)
		}
	}

	var elector *leaderelection.LeaderElector
	var watchdog *leaderelection.HealthzAdaptor
	if cfg.LeaseName != "" {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(cfg.LeaseDuration)
		var err error
		if elector, err = newElector(ctx, cfg, watchdog, leading, func() {
			m.leader.Set(0)
			if ctx.Err() == nil {
				cancel(ErrLostLeadership)
			}
		}); err != nil {
			return err
		}
	}
	var err error
	if srv, err = newServers(ctx, cfg, m, watchdog); err != nil {
		return err
	}
	errs := srv.serve()
	if cfg.WebhookListener != nil {
		m.watchCertificate(cfg.Certificates)
		go loadCertificate(ctx, cfg.Certificates, cfg.CertReload)
	}
	logger.Info("gpudra-controller serving", "metrics", cfg.MetricsListener.Addr(), "webhook", cfg.WebhookListener != nil, "fleetAccounting", cfg.FleetAccounting)
	if elector != nil {
		elected = make(chan struct{})
		go func() {
			defer close(elected)
			elector.Run(ctx)
		}()
	} else {
		go leading(ctx)
	}
	return ended(ctx, errs)
}

// ended waits for why Run returns: a server failed, or ctx ended with a
// cause (lost leadership, the leader's error); nil when it was only
// cancelled.
func ended(ctx context.Context, errs <-chan error) error {
	select {
	case err := <-errs:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
		if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}
}

// newElector is the leader election on cfg's Lease: leading runs while
// this replica leads, stopped when it stops.
func newElector(ctx context.Context, cfg Config, watchdog *leaderelection.HealthzAdaptor, leading func(context.Context), stopped func()) (*leaderelection.LeaderElector, error) {
	logger := klog.FromContext(ctx)
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.LeaseName,
		cfg.Client.CoreV1(), cfg.Client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: cfg.Identity})
	if err != nil {
		return nil, fmt.Errorf("leader election lock: %w", err)
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.LeaseName,
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: leading,
			OnStoppedLeading: stopped,
			OnNewLeader: func(identity string) {
				logger.Info("Leader", "identity", identity, "self", identity == cfg.Identity)
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	return elector, nil
}

// servers are what Run serves, each on its listener: the metrics and
// probes over HTTP, the webhook over HTTPS.
type servers struct {
	servers   []server
	listeners []net.Listener
}

// newServers makes the metrics and probe server, and the webhook's when
// it is on. The webhook's reviews run in ctx.
func newServers(ctx context.Context, cfg Config, m *metrics, watchdog *leaderelection.HealthzAdaptor) (*servers, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", componentmetrics.Handler("controller", m.registry))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if watchdog != nil {
			if err := watchdog.Check(r); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if cfg.WebhookListener != nil && !cfg.Certificates.Ready() {
			http.Error(w, "no webhook serving certificate yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	s := &servers{
		servers:   []server{&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}},
		listeners: []net.Listener{cfg.MetricsListener},
	}
	if cfg.WebhookListener != nil {
		h, err := admission.NewHandler(admission.Validator{DriverName: cfg.DriverName}, cfg.WebhookLimits)
		if err != nil {
			return nil, err
		}
		h.Observe = m.observeReview
		s.servers = append(s.servers, admission.NewServer(h,
			&tls.Config{GetCertificate: cfg.Certificates.GetCertificate, MinVersion: tls.VersionTLS12}, ctx))
		s.listeners = append(s.listeners, cfg.WebhookListener)
	}
	return s, nil
}

// serve starts every server; the channel gets the error of one that
// stopped on its own.
func (s *servers) serve() <-chan error {
	errs := make(chan error, len(s.servers))
	for i, srv := range s.servers {
		go func() {
			if err := srv.Serve(s.listeners[i]); !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		}()
	}
	return errs
}

// shutdown stops the servers, letting requests in flight finish for a
// few seconds.
func (s *servers) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range s.servers {
		_ = srv.Shutdown(ctx)
	}
}

// loadCertificate loads the webhook's serving certificate every second
// until there is one (the leader may be about to create it; the replica
// is not ready before), then re-reads it every reload, until ctx is done.
func loadCertificate(ctx context.Context, certs CertificateSource, reload time.Duration) {
	logger := klog.FromContext(ctx)
	load := func(ctx context.Context) {
		if err := certs.Load(ctx); err != nil {
			logger.Error(err, "Loading the webhook's serving certificate")
		}
	}
	_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		load(ctx)
		return certs.Ready(), nil
	})
	wait.UntilWithContext(ctx, load, reload)
}

// setDefaults gives the durations left zero, and the webhook limits left
// unset, their defaults.
func (cfg *Config) setDefaults() {
	for _, d := range []struct {
		field *time.Duration
		def   time.Duration
	}{
		{&cfg.LeaseDuration, DefaultLeaseDuration},
		{&cfg.RenewDeadline, DefaultRenewDeadline},
		{&cfg.RetryPeriod, DefaultRetryPeriod},
		{&cfg.CertReload, DefaultCertReload},
		{&cfg.CertRotate, DefaultCertRotate},
		{&cfg.RecomputeInterval, DefaultRecomputeInterval},
	} {
		if *d.field <= 0 {
			*d.field = d.def
		}
	}
	if cfg.MigSparesConfigMap == "" {
		cfg.MigSparesConfigMap = DefaultMigSparesConfigMap
	}
	if cfg.WebhookLimits == (admission.Limits{}) {
		cfg.WebhookLimits = admission.DefaultLimits()
	}
}

// lead is the leader's work; it returns when ctx is done, or with an error
// that should end the process.
func lead(ctx context.Context, cfg Config, m *metrics) error {
	logger := klog.FromContext(ctx)
	if r, ok := cfg.Certificates.(rotator); ok && cfg.WebhookListener != nil {
		logger.Info("Leading: renewing the webhook's certificate")
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			if err := r.Rotate(ctx); err != nil {
				logger.Error(err, "Renewing the webhook's certificates")
			}
		}, cfg.CertRotate)
	}
	if !cfg.FleetAccounting {
		<-ctx.Done()
		return nil
	}
	if cfg.NVLinkChannels > 0 {
		logger.Info("Leading: labelling nodes with their NVLink domain and publishing its channel pool")
		errs := make(chan error, 1)
		ctx, cancel := context.WithCancel(ctx)
		defer func() {
			cancel()
			<-errs
		}()
		go func() {
			err := nvlinkpools.Run(ctx, nvlinkpools.Config{
				DriverName:   cfg.DriverName,
				Client:       cfg.Client,
				Channels:     cfg.NVLinkChannels,
				OwnerClass:   NVLinkChannelClass(cfg.DriverName),
				ResyncPeriod: cfg.ResyncPeriod,
			})
			if err != nil && ctx.Err() == nil {
				logger.Error(err, "The NVLink domain labels and channel pools stopped")
			}
			errs <- err
		}()
	}
	logger.Info("Leading: exporting fleet metrics")
	return watchFleet(ctx, cfg, m)
}

// NVLinkChannelClass is the DeviceClass of the exclusive IMEX channels
// (deviceclasses/nvlink.yaml), as the chart names it for a driver:
// nvlink-channel.gpudra.io for the default one, nvlink-channel.<driver>
// beside it. The channel pools' slices are owned by it, so that
// uninstalling the chart deletes them.
func NVLinkChannelClass(driverName string) string {
	if driverName == gpu.DefaultDriverName {
		return "nvlink-channel.gpudra.io"
	}
	return "nvlink-channel." + driverName
}

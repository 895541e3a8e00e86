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
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/mps"
	"github.com/gpudra/gpudra/internal/nodestate"
	"github.com/gpudra/gpudra/internal/plugin"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
)

// Options describe the simulated node.
type Options struct {
	// Dir holds the node's directories (plugin data, registrar, CDI, fake
	// GPU state). Restarting a Cluster over the same Dir is a plugin
	// restart on the same node.
	Dir string
	// NodeName defaults to "node-1".
	NodeName string
	// DriverName defaults to gpu.DefaultDriverName.
	DriverName string
	// Profile is the fake GPU profile; defaults to "dgx-h100".
	Profile string
	// BootID, when set, is written as the node's boot ID; change it between
	// runs to simulate a reboot.
	BootID string
	// DeviceMetadata writes each prepared device's attributes for its
	// containers (--device-metadata).
	DeviceMetadata bool
	// MigProfiles selects the MIG profiles the plugin publishes
	// (--mig-profiles; the zero value: all).
	MigProfiles slicebuilder.MigProfiles
	// SpareGPUs is how many free GPUs publish their MIG placements
	// (--mig-spare-gpus; the zero value: the default).
	SpareGPUs slicebuilder.SpareGPUs
	// Namespace and SparesConfigMap are the plugin's --namespace and
	// --mig-spares-configmap: where it reads, with SpareGPUs in fleet
	// mode, the spares gpudra-controller assigned the node.
	Namespace, SparesConfigMap string
	// Hooks inject faults into the plugin's node state (tests only).
	Hooks nodestate.Hooks
	// Healthcheck serves the plugin's gRPC health service on a free port
	// of 127.0.0.1 (Driver.HealthcheckAddr) and checks its files every
	// FileWatchInterval (default: the plugin's).
	Healthcheck       bool
	FileWatchInterval time.Duration
	// HealthRecheck is how often the plugin asks an unhealthy GPU whether
	// it recovered (default: the plugin's).
	HealthRecheck time.Duration
	// TelemetryInterval, IdleThreshold and IdleAfter tune the plugin's
	// per-device metrics (plugin.Config's: a TelemetryInterval of 0, the
	// default, samples nothing; the thresholds default to the plugin's).
	TelemetryInterval time.Duration
	IdleThreshold     float64
	IdleAfter         time.Duration
	// Fatal receives the errors the plugin cannot recover from (a real
	// plugin exits); by default they are only logged.
	Fatal func(error)
	// ConsumableCapacity publishes shareable whole GPUs (the plugin's
	// --consumable-capacity).
	ConsumableCapacity bool
	// ShareSharing is how shares of a GPU are shared when their config
	// does not say: "MPS", "TimeSlicing" or "None" (the default).
	ShareSharing string
	// MPSCheckInterval is how often the plugin checks its MPS daemons;
	// zero means the plugin's default.
	MPSCheckInterval time.Duration
	// KubernetesVersion is the simulated control plane's (default the
	// newest, as gpudra check's): its scheduler's feature set, and its
	// API server drops the ResourceSlice fields of the features it does
	// not enable, as a real one does, so that the plugin falls back as on
	// such a cluster.
	KubernetesVersion string
	// MPSDisabled runs the plugin without an MPS launcher, as the chart's
	// mps.enabled: false: claims that ask for MPS fail to prepare.
	MPSDisabled bool
}

// Cluster is one simulated node with the plugin running on it.
type Cluster struct {
	Opts   Options
	Client *fake.Clientset
	Driver *plugin.Driver
	Node   *v1.Node

	kubelet  *kubelet
	features scheduler.Features
}

// Paths of the node's directories.
func (o Options) PluginDataDir() string { return filepath.Join(o.Dir, "plugins", o.DriverName) }
func (o Options) RegistrarDir() string  { return filepath.Join(o.Dir, "plugins_registry") }
func (o Options) CDIDir() string        { return filepath.Join(o.Dir, "cdi") }
func (o Options) FakeStateDir() string  { return filepath.Join(o.Dir, "fake-gpus") }
func (o Options) BootIDPath() string    { return filepath.Join(o.Dir, "boot_id") }
func (o Options) MPSDir() string        { return filepath.Join(o.PluginDataDir(), plugin.MPSDirName) }

func (o *Options) defaults() {
	if o.NodeName == "" {
		o.NodeName = "node-1"
	}
	if o.DriverName == "" {
		o.DriverName = gpu.DefaultDriverName
	}
	if o.Profile == "" {
		o.Profile = "dgx-h100"
	}
	if o.BootID == "" {
		o.BootID = "boot-1"
	}
	if o.ShareSharing == "" {
		o.ShareSharing = configapi.SharingNone
	}
}

// NewClientset returns a fake clientset that fills the two gaps of the stock
// one that the ResourceSlice controller depends on: it implements
// generateName (without it the second create fails with `"" already exists`
// forever), and it stamps resourceVersions (without them the controller's
// mutation cache cannot tell its own fresh write from an older informer
// copy, and "repairs" a slice with a second, identical update). New objects
// also get a UID.
func NewClientset(objects ...runtime.Object) *fake.Clientset {
	cs := fake.NewClientset(objects...)
	var names, versions atomic.Int64
	stamp := func(action k8stesting.Action) (bool, runtime.Object, error) {
		withObj, ok := action.(interface{ GetObject() runtime.Object })
		if !ok {
			return false, nil, nil
		}
		obj, ok := withObj.GetObject().(metav1.Object)
		if !ok {
			return false, nil, nil
		}
		if obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), names.Add(1)))
		}
		if action.GetVerb() == "create" && obj.GetUID() == "" {
			obj.SetUID(types.UID(fmt.Sprintf("uid-%s-%s", obj.GetNamespace(), obj.GetName())))
		}
		obj.SetResourceVersion(fmt.Sprint(versions.Add(1)))
		return false, nil, nil // let the tracker store it
	}
	cs.PrependReactor("create", "*", stamp)
	cs.PrependReactor("update", "*", stamp)
	return cs
}

// Start creates the node object and starts the plugin. The client may be
// nil (a fresh fake clientset) or one shared with an earlier Cluster, to
// simulate a plugin restart against the same API server.
func Start(ctx context.Context, opts Options, client *fake.Clientset) (*Cluster, error) {
	opts.defaults()
	if err := prepareNodeFiles(opts); err != nil {
		return nil, err
	}
	if opts.KubernetesVersion == "" {
		opts.KubernetesVersion = scheduler.DefaultKubernetesVersion
	}
	features, err := scheduler.FeaturesFor(opts.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	if client == nil {
		client = NewClientset()
		client.PrependReactor("create", "resourceslices", dropDisabledFields(features))
		client.PrependReactor("update", "resourceslices", dropDisabledFields(features))
	}
	node, err := ensureNode(ctx, client, opts.NodeName)
	if err != nil {
		return nil, err
	}
	driver, err := startPlugin(ctx, opts, client)
	if err != nil {
		return nil, err
	}
	k, err := dialKubelet(filepath.Join(opts.PluginDataDir(), "dra.sock"))
	if err != nil {
		driver.Stop()
		return nil, err
	}
	return &Cluster{Opts: opts, Client: client, Driver: driver, Node: node, kubelet: k, features: features}, nil
}

// prepareNodeFiles makes the directories the plugin and the fake GPUs use
// and writes the node's boot ID.
func prepareNodeFiles(opts Options) error {
	for _, dir := range []string{opts.PluginDataDir(), opts.RegistrarDir(), opts.CDIDir(), opts.FakeStateDir()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(opts.BootIDPath(), []byte(opts.BootID+"\n"), 0o644)
}

// ensureNode returns the node, creating it when the clientset has none.
func ensureNode(ctx context.Context, client *fake.Clientset, name string) (*v1.Node, error) {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		node, err = client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"kubernetes.io/hostname": name},
		}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create node: %w", err)
		}
	}
	return node, nil
}

// startPlugin opens the fake backend and starts the kubelet plugin on it,
// configured as opts says.
func startPlugin(ctx context.Context, opts Options, client *fake.Clientset) (*plugin.Driver, error) {
	shareSharing, err := configapi.SharingFromFlag(opts.ShareSharing)
	if err != nil {
		return nil, err
	}
	// MPS daemons are processes of this machine here: the fake backend's
	// stand-in, a subcommand of this very binary.
	var launcher mps.Launcher = &mps.ProcessLauncher{Root: opts.MPSDir()}
	if opts.MPSDisabled {
		launcher = nil
	}
	// plugin.Start owns the backend: it closes it when it fails, and on
	// Stop.
	be, err := backend.Open(ctx, backend.Options{
		Kind:         "fake",
		NodeName:     opts.NodeName,
		FakeProfile:  opts.Profile,
		FakeStateDir: opts.FakeStateDir(),
		DriverRoot:   "/",
	})
	if err != nil {
		return nil, err
	}
	return plugin.Start(ctx, plugin.Config{
		DriverName:      opts.DriverName,
		NodeName:        opts.NodeName,
		KubeClient:      client,
		Backend:         be,
		PluginDataDir:   opts.PluginDataDir(),
		RegistrarDir:    opts.RegistrarDir(),
		CDIDir:          opts.CDIDir(),
		BootIDPath:      opts.BootIDPath(),
		HealthResend:    time.Second,
		StateHooks:      opts.Hooks,
		MigProfiles:     opts.MigProfiles,
		SpareGPUs:       opts.SpareGPUs,
		Namespace:       opts.Namespace,
		SparesConfigMap: opts.SparesConfigMap,
		DeviceMetadata:  opts.DeviceMetadata,

		HealthcheckAddr:    healthcheckAddr(opts.Healthcheck),
		FileWatchInterval:  opts.FileWatchInterval,
		HealthRecheck:      opts.HealthRecheck,
		TelemetryInterval:  opts.TelemetryInterval,
		IdleThreshold:      opts.IdleThreshold,
		IdleAfter:          opts.IdleAfter,
		Fatal:              opts.Fatal,
		MPS:                launcher,
		MPSDir:             opts.MPSDir(),
		MPSCheckInterval:   opts.MPSCheckInterval,
		ConsumableCapacity: opts.ConsumableCapacity,
		ShareSharing:       shareSharing,
	})
}

// dropDisabledFields makes the fake API server store ResourceSlices as
// one with the feature set does.
func dropDisabledFields(f scheduler.Features) k8stesting.ReactionFunc {
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		if withObj, ok := action.(interface{ GetObject() runtime.Object }); ok {
			if slice, ok := withObj.GetObject().(*resourceapi.ResourceSlice); ok {
				scheduler.DropDisabledFields(slice, f)
			}
		}
		return false, nil, nil // let the stamping reactor and the tracker go on
	}
}

// Stop stops the plugin, as a plugin pod being deleted would.
func (c *Cluster) Stop() {
	if c.kubelet != nil {
		c.kubelet.close()
	}
	c.Driver.Stop()
}

// Restart stops the plugin and starts a new one on the same node
// directories and API server.
func (c *Cluster) Restart(ctx context.Context) (*Cluster, error) {
	c.Stop()
	return Start(ctx, c.Opts, c.Client)
}

// Slices waits until the API server holds the slices the plugin publishes
// now (Driver.Published: the controller writes them asynchronously, and a
// prepare or unprepare that changes which GPUs are held republishes in the
// background), as a scheduler a moment later would see them, and returns
// them.
func (c *Cluster) Slices(ctx context.Context) ([]*resourceapi.ResourceSlice, error) {
	var out []*resourceapi.ResourceSlice
	var err error
	if wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		out, err = c.publishedSlices(ctx)
		return err == nil, nil
	}) != nil {
		return nil, fmt.Errorf("timed out waiting for the plugin to publish its ResourceSlices: %w", err)
	}
	return out, nil
}

// publishedSlices returns the driver's slices in the API server once the
// plugin has published all it means to (an error before).
func (c *Cluster) publishedSlices(ctx context.Context) ([]*resourceapi.ResourceSlice, error) {
	if err := c.Driver.Published(); err != nil {
		return nil, err
	}
	list, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*resourceapi.ResourceSlice
	for i := range list.Items {
		if list.Items[i].Spec.Driver == c.Opts.DriverName {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

func healthcheckAddr(on bool) string {
	if on {
		return "127.0.0.1:0"
	}
	return ""
}

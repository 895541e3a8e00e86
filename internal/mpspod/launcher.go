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

// Package mpspod runs each MPS control daemon as a pod on the plugin's own
// node: the mps.Launcher the kubelet plugin uses on a cluster.
//
// A pod, rather than a process of the plugin, because the daemon must
// outlive the plugin: a plugin restart or a rolling upgrade replaces the
// plugin's container, which takes every process in it along, and the
// daemon's clients (running pods) would lose their GPU context. A daemon
// pod is independent of the plugin pod: the new plugin adopts it by name,
// the kubelet restarts its container if it crashes (the plugin notices in
// the meantime and reports the device unhealthy), and it is deleted only
// when the last claim that uses it is unprepared.
//
// The pod runs the plugin's own image with the command the backend gives
// (the real nvidia-cuda-mps-control from the driver root, privileged and
// in the host's PID namespace; or the fake's unprivileged stand-in). It
// mounts the daemon's directory under the plugin data dir at the same
// path, its shm directory as /dev/shm, and, for the real daemon, the
// driver's usr/ as the plugin does. It has no service account token and
// is pinned to the node by spec.nodeName; the chart's admission policy
// lets the plugin create and delete such pods on its own node only.
package mpspod

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/internal/mps"
)

// Labels and annotations of daemon pods. The keys of the last two are in
// the driver's domain (<driver name>/mps-device), so that two
// installations with different driver names keep apart.
const (
	// LabelComponent marks daemon pods; the admission policy checks it.
	LabelComponent = "app.kubernetes.io/component"
	// ComponentValue is LabelComponent's value on daemon pods.
	ComponentValue = "mps-control-daemon"
	// LabelDevice holds the daemon's ID, the device name.
	LabelDevice = "/mps-device"
	// AnnotationCommand is a digest of what the daemon runs: a pod that
	// runs something else (a recreated MIG device) is replaced.
	AnnotationCommand = "/mps-command"
	containerName     = "mps-control-daemon"
	// driverUsrInContainer is where the plugin, and the real daemon,
	// find the driver's usr/.
	driverUsrInContainer = "/driver-root/usr"
)

// Config configures the launcher.
type Config struct {
	Client kubernetes.Interface
	// Namespace is the plugin's; daemon pods live there.
	Namespace string
	// NodeName is the node the plugin and its daemons run on.
	NodeName string
	// DriverName is the DRA driver name.
	DriverName string
	// Image and PullPolicy are the plugin's own.
	Image      string
	PullPolicy v1.PullPolicy
	// ImagePullSecrets are the plugin pod's.
	ImagePullSecrets []string
	// PriorityClassName of daemon pods; empty for none.
	PriorityClassName string
	// HostDriverRoot is the driver root on the host, whose usr/ a real
	// daemon mounts; empty when the backend needs none.
	HostDriverRoot string
	// StopTimeout bounds how long Stop waits for the pod to be gone;
	// zero means two minutes.
	StopTimeout time.Duration
}

// Launcher runs daemons as pods.
type Launcher struct {
	cfg Config
}

var _ mps.Launcher = (*Launcher)(nil)

// New returns a launcher; it talks to the API server only when used.
func New(cfg Config) (*Launcher, error) {
	if cfg.Client == nil || cfg.Namespace == "" || cfg.NodeName == "" || cfg.Image == "" || cfg.DriverName == "" {
		return nil, fmt.Errorf("mpspod: a client, the namespace, node and driver name and the image are required")
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 2 * time.Minute
	}
	return &Launcher{cfg: cfg}, nil
}

// PodName is the name of the pod of daemon id on this node: stable, so
// that a new plugin finds the pod an earlier one created, and unique per
// node in the namespace.
func (l *Launcher) PodName(id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(l.cfg.NodeName))
	return fmt.Sprintf("gpudra-mps-%08x-%s", h.Sum32(), id)
}

// Start creates the daemon's pod, or adopts the one that runs it.
func (l *Launcher) Start(ctx context.Context, d mps.Daemon) error {
	logger := klog.FromContext(ctx).WithValues("mpsDaemon", d.ID)
	want := l.pod(d)
	pods := l.cfg.Client.CoreV1().Pods(l.cfg.Namespace)
	for range 3 {
		cur, err := pods.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = pods.Create(ctx, want, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("MPS daemon %s: create pod %s/%s: %w", d.ID, l.cfg.Namespace, want.Name, err)
			}
			logger.V(2).Info("Created MPS daemon pod", "pod", klog.KObj(want))
			return nil
		case err != nil:
			return fmt.Errorf("MPS daemon %s: get pod %s/%s: %w", d.ID, l.cfg.Namespace, want.Name, err)
		case cur.DeletionTimestamp == nil && cur.Annotations[l.key(AnnotationCommand)] == want.Annotations[l.key(AnnotationCommand)] &&
			cur.Status.Phase != v1.PodFailed && cur.Status.Phase != v1.PodSucceeded:
			return nil // adopted: a restarted or upgraded plugin finds its daemon
		}
		// Ended, being deleted, or running something else: replace it.
		logger.Info("Replacing MPS daemon pod", "pod", klog.KObj(cur), "phase", cur.Status.Phase, "deleting", cur.DeletionTimestamp != nil)
		if err := l.deleteAndWait(ctx, cur.Name, stopGracePeriod); err != nil {
			return fmt.Errorf("MPS daemon %s: %w", d.ID, err)
		}
	}
	return fmt.Errorf("MPS daemon %s: pod %s/%s keeps coming back", d.ID, l.cfg.Namespace, want.Name)
}

// Stop deletes the daemon's pod and waits until it is gone.
func (l *Launcher) Stop(ctx context.Context, d mps.Daemon) error {
	if err := l.deleteAndWait(ctx, l.PodName(d.ID), stopGracePeriod); err != nil {
		return fmt.Errorf("MPS daemon %s: %w", d.ID, err)
	}
	return nil
}

// Kill deletes the daemon's pod with no grace period (the API server
// forgets it at once and the kubelet kills its container) and waits until
// it is gone: for a daemon that no longer answers, whose replacement must
// not wait for a graceful stop it would never perform.
func (l *Launcher) Kill(ctx context.Context, d mps.Daemon) error {
	if err := l.deleteAndWait(ctx, l.PodName(d.ID), 0); err != nil {
		return fmt.Errorf("MPS daemon %s: %w", d.ID, err)
	}
	return nil
}

// stopGracePeriod is how long a daemon pod being stopped has to exit.
const stopGracePeriod = 10

// List returns the IDs of the daemon pods on this node.
func (l *Launcher) List(ctx context.Context) ([]string, error) {
	list, err := l.cfg.Client.CoreV1().Pods(l.cfg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: LabelComponent + "=" + ComponentValue + "," + l.key(LabelDevice),
		FieldSelector: "spec.nodeName=" + l.cfg.NodeName,
	})
	if err != nil {
		return nil, fmt.Errorf("list MPS daemon pods: %w", err)
	}
	var ids []string
	for _, p := range list.Items {
		// The field selector is a hint some fakes ignore.
		if p.Spec.NodeName == l.cfg.NodeName && p.DeletionTimestamp == nil {
			ids = append(ids, p.Labels[l.key(LabelDevice)])
		}
	}
	return ids, nil
}

func (l *Launcher) deleteAndWait(ctx context.Context, name string, grace int64) error {
	pods := l.cfg.Client.CoreV1().Pods(l.cfg.Namespace)
	err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(grace)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete pod %s/%s: %w", l.cfg.Namespace, name, err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, l.cfg.StopTimeout)
	defer cancel()
	// Ask often at first (a pod without a grace period goes at once),
	// then every second.
	backoff := wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Cap: time.Second, Steps: math.MaxInt32}
	if backoff.DelayFunc().Until(waitCtx, true, true, func(context.Context) (bool, error) {
		// ctx, not the deadline's: a Get under way when the deadline
		// passes still counts.
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}) == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("pod %s/%s not gone after %v", l.cfg.Namespace, name, l.cfg.StopTimeout)
}

// pod is the daemon's pod.
func (l *Launcher) pod(d mps.Daemon) *v1.Pod {
	hostPath := func(name, path string, t v1.HostPathType) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: ptr.To(t)}}}
	}
	volumes := []v1.Volume{
		hostPath("daemon", d.Dir, v1.HostPathDirectory),
		hostPath("shm", d.ShmDir(), v1.HostPathDirectory),
	}
	mounts := []v1.VolumeMount{
		{Name: "daemon", MountPath: d.Dir},
		{Name: "shm", MountPath: "/dev/shm"},
	}
	if d.Command.HostAccess && l.cfg.HostDriverRoot != "" {
		volumes = append(volumes, hostPath("driver-usr", strings.TrimSuffix(l.cfg.HostDriverRoot, "/")+"/usr", v1.HostPathDirectory))
		mounts = append(mounts, v1.VolumeMount{Name: "driver-usr", MountPath: driverUsrInContainer, ReadOnly: true})
	}
	var env []v1.EnvVar
	for _, kv := range d.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, v1.EnvVar{Name: k, Value: v})
	}
	var secrets []v1.LocalObjectReference
	for _, s := range l.cfg.ImagePullSecrets {
		secrets = append(secrets, v1.LocalObjectReference{Name: s})
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      l.PodName(d.ID),
			Namespace: l.cfg.Namespace,
			Labels: map[string]string{
				"app.kubernetes.io/name":       "gpudra",
				"app.kubernetes.io/managed-by": "gpudra-kubelet-plugin",
				LabelComponent:                 ComponentValue,
				l.key(LabelDevice):             d.ID,
			},
			Annotations: map[string]string{l.key(AnnotationCommand): commandDigest(d)},
		},
		Spec: v1.PodSpec{
			NodeName:                      l.cfg.NodeName,
			RestartPolicy:                 v1.RestartPolicyAlways,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			HostPID:                       d.Command.HostAccess,
			PriorityClassName:             l.cfg.PriorityClassName,
			TerminationGracePeriodSeconds: ptr.To[int64](stopGracePeriod),
			Tolerations:                   []v1.Toleration{{Operator: v1.TolerationOpExists}},
			ImagePullSecrets:              secrets,
			Volumes:                       volumes,
			Containers: []v1.Container{{
				Name:            containerName,
				Image:           l.cfg.Image,
				ImagePullPolicy: l.cfg.PullPolicy,
				Command:         d.Command.Args,
				Env:             env,
				VolumeMounts:    mounts,
				SecurityContext: &v1.SecurityContext{
					Privileged:               ptr.To(d.Command.HostAccess),
					AllowPrivilegeEscalation: ptr.To(d.Command.HostAccess),
				},
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("32Mi")},
				},
			}},
		},
	}
}

// key qualifies a label or annotation name with the driver's domain.
func (l *Launcher) key(name string) string { return l.cfg.DriverName + name }

// commandDigest identifies what the daemon runs.
func commandDigest(d mps.Daemon) string {
	h := sha256.New()
	for _, s := range append(append([]string{}, d.Command.Args...), d.Env()...) {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

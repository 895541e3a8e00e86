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
	"bytes"
	"context"
	"flag"
	"fmt"
	"runtime"
	runtimemetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/gpudra/gpudra/deviceclasses"
	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/fleet"
	"github.com/gpudra/gpudra/internal/scheduler"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// The fleet heap: what the leader's informers and the fleet accounting
// keep per node of a fleet of DGX H100 nodes, measured through the
// controller's own informers (newFleetInformers, with its transform) fed
// by a fake clientset that decodes every object from the wire format the
// controller's client asks for, as the API server's answers are decoded.
// ResourceSlices arrive one by one, as watch events, the way client-go's
// streaming lists (WatchListClient, on by default) deliver them; the other
// kinds in one list.
//
//	go test ./internal/controller -run '^$' -bench BenchmarkFleetHeap -benchtime 1x [-fleet-nodes 100,1000,5000]
//
// reports, per layout (every free GPU's MIG placements, --mig-spare-gpus=all,
// the worst case; the plugin's default, one spare GPU's placements; whole
// GPUs only, --mig-profiles=none) and fleet size:
// MiB/node held by the informers' caches, MiB/node held after the first
// recompute (caches and the accounting's own state), and the peak heap
// during that recompute, per node.

// fleetLayouts are the published layouts measured.
var fleetLayouts = []struct {
	name string
	pool fakenodes.Pool
}{
	{"all-placements", fakenodes.Pool{SpareGPUs: slicebuilder.SpareGPUs{All: true}}},
	{"default-spare", fakenodes.Pool{}},
	{"whole-gpus", fakenodes.Pool{MigProfiles: slicebuilder.MigProfiles{None: true}}},
}

// fleetNodes are the fleet sizes BenchmarkFleetHeap measures.
var fleetNodes = flag.String("fleet-nodes", "100,1000", "fleet sizes for BenchmarkFleetHeap, comma-separated")

// wireFleet is a fleet as the API server sends it: the ResourceSlices one
// by one, one encoded list per other resource.
type wireFleet struct {
	nodes       int
	contentType string
	slices      [][]byte
	lists       map[string][]byte // by resource
}

// gpusHeld is how many GPUs of each node a running pod holds in a busy
// fleet: 7 of 8, the 90 % of the fleet benchmark's busy cell.
const gpusHeld = 7

// newWireFleet encodes a fleet of nodes DGX H100 nodes publishing with
// pool's settings. busy: gpusHeld GPUs of each node are held by running
// pods (one claim from a template each), and a few pods wait (one GPU,
// eight on one NVLink island, one 1g.10gb partition).
func newWireFleet(tb testing.TB, pool fakenodes.Pool, nodes int, busy bool) *wireFleet {
	tb.Helper()
	ctx := context.Background()
	w := &wireFleet{nodes: nodes, contentType: wireContentType, lists: map[string][]byte{}}
	dir := tb.TempDir()
	// A hundred nodes at a time, encoded as they come: a large fleet's
	// slices in full do not fit in memory at once.
	for first := 1; first <= nodes; first += 100 {
		batch := make([][]*resourceapi.ResourceSlice, min(100, nodes-first+1))
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for j := range batch {
			wg.Go(func() {
				batch[j], errs[j] = fakenodes.Node(ctx, fakenodes.DefaultProfile, fakenodes.NodeName(first+j), testDriver, dir, pool)
			})
		}
		wg.Wait()
		for j, sl := range batch {
			if errs[j] != nil {
				tb.Fatal(errs[j])
			}
			w.encodeNode(tb, sl)
		}
	}

	m, err := scheduler.LoadFS(deviceclasses.FS, "deviceclasses")
	if err != nil {
		tb.Fatal(err)
	}
	classList := &resourceapi.DeviceClassList{}
	for _, o := range m.Classes {
		classList.Items = append(classList.Items, *o.Obj.(*resourceapi.DeviceClass))
	}
	w.encode(tb, "deviceclasses", classList)

	nodeList, podList, claimList := &corev1.NodeList{}, &corev1.PodList{}, &resourceapi.ResourceClaimList{}
	for i := 1; i <= nodes; i++ {
		name := fakenodes.NodeName(i)
		nodeList.Items = append(nodeList.Items, benchNode(name))
		if !busy {
			continue
		}
		for g := range gpusHeld {
			pod, claim := benchRunning(name, g)
			podList.Items = append(podList.Items, pod)
			claimList.Items = append(claimList.Items, claim)
		}
	}
	if busy {
		for i, want := range []struct {
			class  string
			count  int64
			island bool
		}{
			{"gpu.gpudra.io", 1, false}, {"gpu.gpudra.io", 8, true}, {"mig-1g.10gb.gpudra.io", 1, false},
		} {
			for j := range 5 {
				pod, claim := benchPending(fmt.Sprintf("wait-%d-%d", i, j), want.class, want.count, want.island)
				podList.Items = append(podList.Items, pod)
				claimList.Items = append(claimList.Items, claim)
			}
		}
	}
	w.encode(tb, "nodes", nodeList)
	w.encode(tb, "pods", podList)
	w.encode(tb, "resourceclaims", claimList)
	return w
}

// encodeNode adds one node's slices.
func (w *wireFleet) encodeNode(tb testing.TB, sl []*resourceapi.ResourceSlice) {
	tb.Helper()
	for _, s := range sl {
		s.UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", len(w.slices)))
		s.ResourceVersion = strconv.Itoa(1000 + len(w.slices))
		s.CreationTimestamp = metav1.Time{Time: benchNow}
		w.slices = append(w.slices, w.encodeOne(tb, s, resourceapi.SchemeGroupVersion))
	}
}

func (w *wireFleet) encode(tb testing.TB, resource string, list k8sruntime.Object) {
	tb.Helper()
	gv := resourceapi.SchemeGroupVersion
	if resource == "nodes" || resource == "pods" {
		gv = corev1.SchemeGroupVersion
	}
	w.lists[resource] = w.encodeOne(tb, list, gv)
}

func (w *wireFleet) encodeOne(tb testing.TB, obj k8sruntime.Object, gv schema.GroupVersion) []byte {
	tb.Helper()
	info, ok := k8sruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), w.contentType)
	if !ok {
		tb.Fatalf("no serializer for %s", w.contentType)
	}
	var buf bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, gv).Encode(obj, &buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// client is a fake clientset whose lists are decoded afresh from the wire
// on every call; the ResourceSlices come, decoded one at a time, as the
// watch's events.
func (w *wireFleet) client(tb testing.TB) *fake.Clientset {
	cs := fake.NewClientset()
	decoder := scheme.Codecs.UniversalDeserializer()
	for resource, data := range w.lists {
		cs.PrependReactor("list", resource, func(clienttesting.Action) (bool, k8sruntime.Object, error) {
			obj, _, err := decoder.Decode(data, nil, nil)
			if err != nil {
				tb.Errorf("decode %s: %v", resource, err)
			}
			return true, obj, err
		})
	}
	cs.PrependReactor("list", "resourceslices", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		return true, &resourceapi.ResourceSliceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
	})
	cs.PrependWatchReactor("resourceslices", func(clienttesting.Action) (bool, watch.Interface, error) {
		events := watch.NewFake()
		go func() {
			for _, data := range w.slices {
				obj, _, err := decoder.Decode(data, nil, nil)
				if err != nil {
					tb.Errorf("decode a ResourceSlice: %v", err)
					return
				}
				events.Add(obj)
			}
		}()
		return true, events, nil
	})
	return cs
}

// fleetHeap is what one measurement found, in bytes.
type fleetHeap struct {
	// cached is what the informers' caches hold.
	cached int64
	// held is what stays after the first recompute: the caches and the
	// accounting's own state.
	held int64
	// peak is the highest heap during the first recompute.
	peak int64
	// snap is the recompute's result, to check the measurement counted a
	// fleet that is what it should be.
	snap fleet.Snapshot
}

// measure starts the controller's informers on the fleet, waits for their
// caches, runs one recompute as the leader does, and measures the heap.
func (w *wireFleet) measure(tb testing.TB) fleetHeap {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := w.client(tb)
	base := liveHeap()
	inf := newFleetInformers(ctx, cs, 0)
	if err := inf.start(ctx, cache.ResourceEventHandlerFuncs{}); err != nil {
		tb.Fatal(err)
	}
	_ = wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return len(inf.slices.GetStore().ListKeys()) >= len(w.slices), nil
	})
	var out fleetHeap
	out.cached = liveHeap() - base

	strander := &fleet.Strander{}
	in, err := inf.inputs(testDriver, benchNow, scheduler.DefaultFeatures())
	if err != nil {
		tb.Fatal(err)
	}
	stop := samplePeak()
	out.snap, err = strander.Recompute(ctx, in)
	out.peak = stop() - base
	if err != nil {
		tb.Fatal(err)
	}
	in = fleet.Inputs{}
	out.held = liveHeap() - base
	runtime.KeepAlive(strander)
	runtime.KeepAlive(in)
	cancel()
	inf.factory.Shutdown()
	runtime.KeepAlive(cs)
	return out
}

// liveHeap is the heap in use after two garbage collections: what is
// reachable.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// samplePeak samples the heap (live objects and garbage not yet
// collected: what the process must hold memory for) every millisecond
// until the returned function is called, which returns the highest value.
func samplePeak() func() int64 {
	sample := []runtimemetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			runtimemetrics.Read(sample)
			peak = max(peak, int64(sample[0].Value.Uint64()))
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// maxHeapPerNode is what the controller may hold per node of a busy DGX
// H100 fleet (issue 17: 0.25 MiB).
const maxHeapPerNode = 0.25 * (1 << 20)

// TestFleetHeapPerNode: the heap the controller keeps grows with the
// fleet by at most maxHeapPerNode per node, whatever the layout. Measured
// between two fleet sizes, so what does not grow with the fleet (the
// informers themselves, the classes) cancels out. (Before slices were
// compacted: 1.7 MiB per node with every MIG placement published.)
func TestFleetHeapPerNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two fleets of fake nodes")
	}
	const small, large = 2, 16
	for _, layout := range fleetLayouts {
		t.Run(layout.name, func(t *testing.T) {
			a := newWireFleet(t, layout.pool, small, true).measure(t)
			b := newWireFleet(t, layout.pool, large, true).measure(t)
			perNode := func(x, y int64) float64 { return float64(y-x) / (large - small) }
			t.Logf("per node: cached %.3f MiB, held %.3f MiB, peak %.3f MiB",
				perNode(a.cached, b.cached)/(1<<20), perNode(a.held, b.held)/(1<<20), perNode(a.peak, b.peak)/(1<<20))
			if got := perNode(a.held, b.held); got > maxHeapPerNode {
				t.Errorf("the controller holds %.3f MiB per node, want at most %.2f", got/(1<<20), maxHeapPerNode/(1<<20))
			}
			// The measurement counted the fleet it was given.
			gpus := 0
			for _, c := range b.snap.GPUs {
				gpus += c.Free + c.Whole + c.Partitioned
			}
			if gpus != 8*large || b.snap.AllocatedClaims != gpusHeld*large {
				t.Errorf("the accounting saw %d GPUs and %d allocated claims, want %d and %d", gpus, b.snap.AllocatedClaims, 8*large, gpusHeld*large)
			}
		})
	}
}

func BenchmarkFleetHeap(b *testing.B) {
	for _, layout := range fleetLayouts {
		for _, busy := range []bool{false, true} {
			for _, n := range strings.Split(*fleetNodes, ",") {
				nodes, err := strconv.Atoi(n)
				if err != nil {
					b.Fatalf("-fleet-nodes: %v", err)
				}
				fleetState := "empty"
				if busy {
					fleetState = "busy"
				}
				b.Run(fmt.Sprintf("layout=%s/fleet=%s/nodes=%d", layout.name, fleetState, nodes), func(b *testing.B) {
					w := newWireFleet(b, layout.pool, nodes, busy)
					var h fleetHeap
					for b.Loop() {
						h = w.measure(b)
					}
					perNode := func(v int64) float64 { return float64(v) / float64(nodes) / (1 << 20) }
					b.ReportMetric(perNode(h.cached), "cached-MiB/node")
					b.ReportMetric(perNode(h.held), "held-MiB/node")
					b.ReportMetric(perNode(h.peak), "peak-MiB/node")
					b.ReportMetric(float64(h.held)/(1<<20), "held-MiB")
					b.ReportMetric(float64(h.peak)/(1<<20), "peak-MiB")
				})
			}
		}
	}
}

var benchNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// benchNode is a GPU node as the API server holds it: labels from GPU
// feature discovery, capacity, conditions, images.
func benchNode(name string) corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": "us-east-1a",
		"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8",
		"nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.family": "hopper", "nvidia.com/cuda.driver.major": "570",
		"nvidia.com/cuda.driver.minor": "124", "nvidia.com/cuda.driver.rev": "06", "nvidia.com/mig.capable": "true",
		"feature.node.kubernetes.io/pci-10de.present": "true", "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel",
	}
	q := resource.MustParse
	res := corev1.ResourceList{"cpu": q("192"), "memory": q("2063937Mi"), "pods": q("110"), "ephemeral-storage": q("28Ti"), "hugepages-1Gi": q("0"), "hugepages-2Mi": q("0")}
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-uid-" + name), ResourceVersion: "42", Labels: labels,
			CreationTimestamp: metav1.Time{Time: benchNow},
			Annotations:       map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", ProviderID: "aws:///us-east-1a/i-0123456789abcdef0",
			Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res,
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.1.17"}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: "ec2a1b2c3d4e5f", SystemUUID: "ec2a1b2c-3d4e-5f60-7182-93a4b5c6d7e8", BootID: "5e3c1f2a-0b9d-4c8e-a7f6-1d2e3f4a5b6c",
				KernelVersion: "6.8.0-1021-aws", OSImage: "Ubuntu 24.04.2 LTS", ContainerRuntimeVersion: "containerd://2.1.4",
				KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64"}},
	}
	for _, c := range []corev1.NodeConditionType{"MemoryPressure", "DiskPressure", "PIDPressure", corev1.NodeReady} {
		status := corev1.ConditionFalse
		if c == corev1.NodeReady {
			status = corev1.ConditionTrue
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c, Status: status, Reason: "Kubelet" + string(c),
			Message: "kubelet reports " + string(c), LastHeartbeatTime: metav1.Time{Time: benchNow}, LastTransitionTime: metav1.Time{Time: benchNow}})
	}
	for i := range 30 {
		img := fmt.Sprintf("registry.example.com/team/training-image-%d", i)
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{img + "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", img + ":v1.2.3"}, SizeBytes: 9_876_543_210})
	}
	return n
}

// benchPod is a pod of a training Job that uses one claim from a
// template, as the API server holds it.
func benchPod(name, node string, phase corev1.PodPhase) corev1.Pod {
	q := resource.MustParse
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID("pod-uid-" + name), ResourceVersion: "77",
			GenerateName: name[:len(name)-2], CreationTimestamp: metav1.Time{Time: benchNow},
			Labels:          map[string]string{"app.kubernetes.io/name": "train", "batch.kubernetes.io/job-name": "train", "batch.kubernetes.io/controller-uid": "3f2e1d0c-b9a8-4766-9554-433221100fed", "job-name": "train"},
			Annotations:     map[string]string{"batch.kubernetes.io/job-completion-index": "3"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "3f2e1d0c-b9a8-4766-9554-433221100fed", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			Finalizers:      []string{"batch.kubernetes.io/job-tracking"}},
		Spec: corev1.PodSpec{
			NodeName: node, ServiceAccountName: "default", RestartPolicy: corev1.RestartPolicyNever, SchedulerName: "default-scheduler",
			TerminationGracePeriodSeconds: ptr.To[int64](30), DNSPolicy: corev1.DNSClusterFirst, EnableServiceLinks: ptr.To(true),
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
			Containers: []corev1.Container{{
				Name: "train", Image: "registry.example.com/team/training-image-3:v1.2.3", ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"torchrun"}, Args: []string{"--nproc-per-node=1", "train.py", "--config=/etc/train/config.yaml"},
				Env: []corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}, {Name: "EPOCHS", Value: "90"}, {Name: "DATA", Value: "s3://bucket/imagenet"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("16"), "memory": q("128Gi")},
					Limits: corev1.ResourceList{"memory": q("128Gi")}, Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
				VolumeMounts:             []corev1.VolumeMount{{Name: "kube-api-access-x2k9p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			Volumes: []corev1.Volume{{Name: "kube-api-access-x2k9p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](420),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}}},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			},
		},
		Status: corev1.PodStatus{Phase: phase, QOSClass: corev1.PodQOSBurstable},
	}
	if phase == corev1.PodRunning {
		p.Status.HostIP, p.Status.PodIP = "10.0.1.17", "10.244.1.23"
		p.Status.StartTime = &metav1.Time{Time: benchNow}
		for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: benchNow}})
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "train", Ready: true, Started: ptr.To(true),
			Image: "registry.example.com/team/training-image-3:v1.2.3", ImageID: "registry.example.com/team/training-image-3@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			ContainerID: "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: benchNow}}}}}
	}
	p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(name + "-gpu-x7k2q")}}
	return p
}

// benchClaim is the claim the resourceclaim controller makes for a pod
// from its template.
func benchClaim(pod corev1.Pod, class string, count int64, island bool) resourceapi.ResourceClaim {
	c := resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: *pod.Status.ResourceClaimStatuses[0].ResourceClaimName, Namespace: pod.Namespace,
			GenerateName: pod.Name + "-gpu-", UID: types.UID("claim-uid-" + pod.Name), ResourceVersion: "78", CreationTimestamp: metav1.Time{Time: benchNow},
			Annotations:     map[string]string{"resource.kubernetes.io/pod-claim-name": "gpu"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			Finalizers:      []string{"resource.kubernetes.io/delete-protection"}},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}}}},
	}
	if island {
		c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(testDriver + "/nvlinkGroup"))}}
	}
	return c
}

// benchRunning is a running pod on node holding GPU g, and its claim.
func benchRunning(node string, g int) (corev1.Pod, resourceapi.ResourceClaim) {
	pod := benchPod(fmt.Sprintf("train-%s-%d-ab", node, g), node, corev1.PodRunning)
	c := benchClaim(pod, "gpu.gpudra.io", 1, false)
	c.Status = resourceapi.ResourceClaimStatus{
		Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: testDriver, Pool: node, Device: fmt.Sprintf("gpu-%d", g)}}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
			AllocationTimestamp: &metav1.Time{Time: benchNow},
		},
		ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}},
	}
	return pod, c
}

// benchPending is a pod waiting for its claim.
func benchPending(name, class string, count int64, island bool) (corev1.Pod, resourceapi.ResourceClaim) {
	pod := benchPod(name+"-ab", "", corev1.PodPending)
	return pod, benchClaim(pod, class, count, island)
}

// wireContentType is the codec of the controller's client; the fleet is
// encoded in it.
const wireContentType = ContentType

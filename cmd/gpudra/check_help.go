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

package main

// checkHelpIntro and checkHelpRest are check's help (Long), before and
// after the list of fake profiles: what it checks, on which inventory, and
// what its exit status says.
const (
	checkHelpIntro = `check tells you, before you apply anything and without a cluster, whether
your DeviceClasses, ResourceClaimTemplates, ResourceClaims and Pods work on a
given inventory:

  - every CEL selector (class selectors, request selectors, firstAvailable
    subrequests) is compiled with the Kubernetes DRA CEL environment and the
    API server's length and cost limits; errors show the file, document,
    object, field and the expression with a caret;
  - attributes the inventory never publishes (a capacity used as an attribute
    gets "use device.capacity[...]"), capacities and driver names it does not
    have, comparisons of a version with a string, classes that match nothing;
  - each selector is evaluated on every device: which devices each class and
    request matches, and which devices make an expression fail at run time
    (the scheduler stops on those);
  - opaque configs for gpudra's driver (in claims, templates and classes) are
    decoded and validated with the kubelet plugin's own decoder; another
    vendor's config gets a note naming gpudra's equivalent;
  - each allocated claim goes through the kubelet plugin's own prepare-time
    decision (internal/claimplan): the config each device gets must be of its
    kind, MPS on one device per claim, per-device limits keyed by a device
    of the claim, claims that share a GPU sharing it alike (--sequential
    feeds it what earlier claims hold), monitoring devices for admin access
    only: what the plugin would refuse (the pod stays in ContainerCreating)
    is an error here; --mps and --consumable-capacity-sharing are the node
    pool's chart settings it depends on;
  - every pod is checked or explained: plain Pods and the pod templates of
    Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs and CronJobs;
    extended resources (resources.limits: nvidia.com/mig-1g.10gb: 1) become
    the claim the scheduler makes from the DeviceClass with that
    extendedResourceName; a pod that needs no DRA device is listed as such;
  - each pod's claims are allocated together with the real scheduler
    allocator (k8s.io/dynamic-resource-allocation/structured) using the
    feature set of --kubernetes-version, with the devices they get, or why a
    claim can never be satisfied (no device matches, not enough on one node,
    matchAttribute cannot be met, counters exhausted, held by earlier claims).

Objects of kinds check does not read (ConfigMaps, Namespaces) are listed as
ignored; custom resources get a warning (check cannot say what they do),
NVIDIA's (ComputeDomain, GpuClaimParameters) an error, since a gpudra
cluster has no CRD for them. resource.k8s.io v1beta1, v1beta2 and v1alpha3
objects are errors (no default API server of a supported release serves
them) and are read on as the v1 objects the API server would store.

The inventory is the ResourceSlices in the inputs (gpudra inventory writes
them for a node), or (by default, or with --profile) what gpudra's own slice
builder publishes on --nodes fake nodes of a profile: `
	checkHelpRest = `, or a profile file,
as the plugin publishes them on --kubernetes-version: whole GPUs only where
the cluster does not serve partitionable devices (1.34, 1.35), exclusive
GPUs where it does not serve consumable capacity, no device taints where it
drops them; the report says so.
gpudra's DeviceClasses are built in, as the Helm chart installs them; a class
in the inputs with the name of a built-in one replaces it (a finding when it
differs).

Findings are errors (the API server or gpudra's plugin refuses it, or a pod
stays Pending or never starts), warnings (it works, but probably not as
meant, or check could not check all of it) or notes (--verbose shows them).

With --server-dry-run (or --server), every input object is also applied to a
real cluster with a server-side dry run, which stores nothing: what its API
server (validation, admission webhooks, gpudra's included) rejects is an
error of kind server-rejects.

With --cluster the inventory is a live cluster's instead (through your
kubeconfig, with kubectl's flags: --kubeconfig, --context, --as,
--request-timeout, ...; the dry run uses them too): its ResourceSlices and
DeviceClasses (the built-in classes are not added), with the devices its
allocated ResourceClaims hold taken, so check says what fits right now,
with the feature set of the Kubernetes version its API server reports
(unless --kubernetes-version is given). gpudra's own classes there are not
errors for matching nothing: in fleet mode most nodes publish no MIG
placements until gpudra-controller gives them a spare. A claim in the
inputs with the name of one in the cluster stands for it. It needs list on
deviceclasses, resourceslices and resourceclaims.

-o json and -o yaml print the report as one object (its exitCode is the
exit status).

Exit status: 0 no errors (warnings and notes do not count, unless
--strict), 1 errors (or warnings with --strict), 2 unusable input (an
unreadable file, malformed YAML, a file without Kubernetes objects, bad
flags), 3 the cluster of --cluster or --server-dry-run could not be read (no
kubeconfig, no answer).`
)

// checkExample shows check's common uses.
const checkExample = `  # the shipped DeviceClasses and examples on a fake DGX H100
  gpudra check --examples

  # your manifests on 4 fake DGX A100 nodes, as Kubernetes 1.34 would do it
  gpudra check --profile dgx-a100 --nodes 4 --kubernetes-version 1.34 ./manifests/

  # what fits together on one mixed node (H100 island, A100 island, an L4)
  gpudra check --profile mixed --sequential claims.yaml pods.yaml

  # what fits on the cluster right now
  gpudra check --cluster --context prod ./manifests/

  # against ResourceSlices taken from a cluster, for CI
  kubectl get resourceslices -o yaml > slices.yaml
  gpudra check -o json slices.yaml ./manifests/ | jq '.findings'

  # a selector from standard input
  cat <<'YAML' | gpudra check -
  apiVersion: resource.k8s.io/v1
  kind: ResourceClaimTemplate
  metadata: {name: big-gpu}
  spec:
    spec:
      devices:
        requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.gpudra.io
            selectors:
            - cel:
                expression: device.capacity['gpu.gpudra.io'].memory.compareTo(quantity('40Gi')) >= 0
  YAML`

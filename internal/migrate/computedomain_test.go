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

package migrate

import (
	"strings"
	"testing"

	"github.com/gpudra/gpudra/internal/scheduler"
)

const computeDomain = `apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata:
  name: cd
  namespace: ml
spec:
  numNodes: 2
  channel:
    resourceClaimTemplate:
      name: cd-channel
`

// podSpecUsing is a pod spec, at the indent given, whose one claim comes
// from the template.
func podSpecUsing(indent, extra string) string {
	s := extra + "containers:\n- name: ctr\n  image: busybox\nresourceClaims:\n- name: channel\n  resourceClaimTemplateName: cd-channel\n"
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString(indent + l)
		}
	}
	return b.String()
}

// TestComputeDomainClass: a ComputeDomain becomes the claim template it
// named, in its namespace; the class depends on who names the template:
// pods that each take a claim of their own from it (a workload's pod
// template outside a PodGroup, in any input file) get the shared channel
// 0, so that they share one as they shared NVIDIA's channel 0; a bare pod
// or a PodGroup's pods get an exclusive channel. The chart's class names
// follow the driver name.
func TestComputeDomainClass(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: ml\nspec:\n" + podSpecUsing("  ", "")
	deployment := func(ns, extra string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: " + ns + "\nspec:\n  replicas: 2\n  template:\n    spec:\n" + podSpecUsing("      ", extra)
	}
	podGroup := func(template string) string {
		return "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata:\n  name: job\n  namespace: ml\nspec:\n  resourceClaims:\n  - name: channel\n    resourceClaimTemplateName: " + template + "\n"
	}
	for _, tc := range []struct {
		name   string
		driver string
		others []string
		class  string
	}{
		{"alone", "", nil, "nvlink-channel.gpudra.io"},
		{"a pod", "", []string{pod}, "nvlink-channel.gpudra.io"},
		{"a deployment", "", []string{deployment("ml", "")}, "nvlink-shared.gpudra.io"},
		{"a deployment in another namespace", "", []string{deployment("other", "")}, "nvlink-channel.gpudra.io"},
		{"a PodGroup's deployment, the group's claim", "", []string{deployment("ml", "schedulingGroup:\n  podGroupName: job\n"), podGroup("cd-channel")}, "nvlink-channel.gpudra.io"},
		{"a PodGroup's deployment, its own claims", "", []string{deployment("ml", "schedulingGroup:\n  podGroupName: job\n"), podGroup("other")}, "nvlink-shared.gpudra.io"},
		{"another driver name", "gpu.example.org", []string{deployment("ml", "")}, "nvlink-shared.gpu.example.org"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []scheduler.File{{Name: "cd.yaml", Data: []byte(computeDomain)}}
			for _, o := range tc.others {
				in = append(in, scheduler.File{Name: "workload.yaml", Data: []byte(o)})
			}
			res, err := Files(in, Options{DriverName: tc.driver})
			if err != nil {
				t.Fatal(err)
			}
			out := string(res.Files[0].Data)
			for _, want := range []string{"kind: ResourceClaimTemplate\n", "  name: cd-channel\n  namespace: ml\n", "deviceClassName: " + tc.class + "\n", "# kind: ComputeDomain\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("the output lacks %q:\n%s", want, out)
				}
			}
			if res.Unmigrated() != 0 {
				t.Errorf("things reported without an equivalent:\n%s", notesText(res))
			}
			for i := 1; i < len(res.Files); i++ {
				if res.Files[i].Changed {
					t.Errorf("the workload changed:\n%s", res.Files[i].Data)
				}
			}
		})
	}
}

// TestComputeDomainDaemonSide: what NVIDIA's controller makes for the
// IMEX daemons (their claim template, class and cliques) is dropped with
// the reason; a channel config is taken out of a channel claim, and its
// allocationMode All is explained.
func TestComputeDomainDaemonSide(t *testing.T) {
	in := `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: cd-daemon
spec:
  spec:
    devices:
      requests:
      - name: daemon
        exactly:
          deviceClassName: compute-domain-daemon.nvidia.com
      config:
      - requests: ["daemon"]
        opaque:
          driver: compute-domain.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: ComputeDomainDaemonConfig
            domainID: 1234
---
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomainClique
metadata:
  name: 9f410827-489f-46fd-8203-51266ca08eb7.32766
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: cd-channel
spec:
  spec:
    devices:
      requests:
      - name: channel
        exactly:
          deviceClassName: compute-domain-default-channel.nvidia.com
      config:
      - requests: ["channel"]
        opaque:
          driver: compute-domain.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: ComputeDomainChannelConfig
            domainID: 1234
            allocationMode: All
`
	res, err := Files([]scheduler.File{{Name: "in.yaml", Data: []byte(in)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Files[0].Data)
	docs := strings.Split(out, "---\n")
	if len(docs) != 3 {
		t.Fatalf("%d documents out:\n%s", len(docs), out)
	}
	for i, want := range []string{"# gpudra migrate: dropped a claim for NVIDIA's DeviceClass compute-domain-daemon.nvidia.com", "# gpudra migrate: dropped NVIDIA's ComputeDomainClique"} {
		if !strings.HasPrefix(docs[i], want) {
			t.Errorf("document %d:\n%s\nwant it dropped (%q)", i, docs[i], want)
		}
	}
	if !strings.Contains(docs[2], "deviceClassName: nvlink-channel.gpudra.io") || strings.Contains(docs[2], "config:") || strings.Contains(docs[2], "compute-domain.nvidia.com") {
		t.Errorf("the channel template:\n%s", docs[2])
	}
	notes := notesText(res)
	for _, want := range []string{"IMEX daemon on every node", "ComputeDomainChannelConfig dropped", "allocationMode All gave each pod all of its node's IMEX channel device nodes"} {
		if !strings.Contains(notes, want) {
			t.Errorf("the notes lack %q:\n%s", want, notes)
		}
	}
	if res.Unmigrated() != 0 {
		t.Errorf("things reported without an equivalent:\n%s", notes)
	}
}

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
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestDeviceMetadata: with --device-metadata, a container gets, for each
// request, a JSON file with its devices' attributes (KEP-5304): the
// published attributes, and for a MIG partition its GPU's (which the
// slices leave out), its placement and its own MIG-… UUID.
func TestDeviceMetadata(t *testing.T) {
	ctx, c := startClusterWith(t, Options{Profile: "dgx-h100", DeviceMetadata: true})
	res, err := runClaim(ctx, t, c, migClaim("small", false, "1g.10gb"))
	if err != nil {
		t.Fatal(err)
	}
	ctr := res.Containers[0]
	var host string
	for _, m := range ctr.Mounts {
		src, dst, _ := strings.Cut(m, " -> ")
		if dst == "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/small/mig0/gpu.gpudra.io-metadata.json" {
			host = src
		}
	}
	if host == "" {
		t.Fatalf("no device metadata mount among %v", ctr.Mounts)
	}
	data, err := os.ReadFile(host)
	if err != nil {
		t.Fatal(err)
	}
	// A JSON stream, one object per API version, newest first.
	var md struct {
		APIVersion string `json:"apiVersion"`
		Requests   []struct {
			Devices []struct {
				Name       string                    `json:"name"`
				Attributes map[string]map[string]any `json:"attributes"`
			} `json:"devices"`
		} `json:"requests"`
	}
	if err := json.NewDecoder(strings.NewReader(string(data))).Decode(&md); err != nil {
		t.Fatalf("%s: %v\n%s", host, err, data)
	}
	if md.APIVersion != "metadata.resource.k8s.io/v1beta1" || len(md.Requests) != 1 || len(md.Requests[0].Devices) != 1 {
		t.Fatalf("metadata %s:\n%s", host, data)
	}
	attrs := md.Requests[0].Devices[0].Attributes
	uuid, _ := attrs["uuid"]["string"].(string)
	if want := ctr.FakeDevices(); !strings.HasPrefix(uuid, "MIG-") || len(want) != 1 || uuid != want[0] {
		t.Errorf("metadata uuid %q, want the MIG device's %v", uuid, want)
	}
	for _, name := range []string{"profile", "parentUUID", "parentIndex", "placementStart", "placementSize", "nvlinkGroup", "resource.kubernetes.io/pciBusID", "productName", "driverVersion"} {
		if _, ok := attrs[name]; !ok {
			t.Errorf("metadata lacks %s: %v", name, attrs)
		}
	}
	for _, name := range []string{"index", "minor", "type"} {
		if name == "type" {
			if v, _ := attrs[name]["string"].(string); v != "mig" {
				t.Errorf("metadata type %q, want mig", v)
			}
		} else if _, ok := attrs[name]; ok {
			t.Errorf("metadata of a partition carries the GPU's %s: %v", name, attrs)
		}
	}
}

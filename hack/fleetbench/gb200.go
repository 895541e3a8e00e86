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

import (
	"fmt"
	"os"
	"path/filepath"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpudra/gpudra/internal/fakenodes"
	"github.com/gpudra/gpudra/internal/slicebuilder"
)

// A GB200 NVL72 fleet: racks of 18 compute trays of 4 GPUs, each rack one
// NVLink domain. Every tray is a gb200-tray fake node with a profile file
// of its own that puts it in its rack's fabric (cluster UUID, NMX's
// default clique) at its tray index, so that the plugin's discovery gives
// its GPUs the rack's nvlinkDomain attribute; the Node carries the label
// gpudra-controller would put on it, and every domain has the channel pool
// the controller publishes for it.

// profileGB200 is the fake profile of a GB200 fleet's nodes.
const profileGB200 = "gb200-tray"

const (
	// traysPerDomain: the compute trays of an NVL72 rack.
	traysPerDomain = 18
	// gpusPerTray: what the gb200-tray profile has.
	gpusPerTray = 4
	// gb200Clique is NMX's default partition: the whole rack in one
	// clique, as a rack runs before anyone partitions it.
	gb200Clique = 32766
)

// isGB200 says whether the fleet is of GB200 trays.
func isGB200(profile string) bool { return profile == profileGB200 }

// rackOf is the rack (NVLink domain index) of node i (0-based): racks fill
// in node order.
func rackOf(i int) int { return i / traysPerDomain }

// rackUUID is the fabric cluster UUID of a rack, a version-4-shaped UUID
// that says which rack it is.
func rackUUID(rack int) string { return fmt.Sprintf("9f410827-0000-4000-8000-%012x", rack+1) }

// domainOf is the nvlinkDomain attribute value (and node label value) of
// the GPUs of node i: "<clusterUUID>.<cliqueID>", as discovery writes it.
func domainOf(i int) string { return domainOfRack(rackOf(i)) }

func domainOfRack(rack int) string { return fmt.Sprintf("%s.%d", rackUUID(rack), gb200Clique) }

// fleetDomains are the domains of a fleet of n trays, rack order.
func fleetDomains(n int) []string {
	var out []string
	for r := 0; r*traysPerDomain < n; r++ {
		out = append(out, domainOfRack(r))
	}
	return out
}

// trayProfile writes node i's profile file into dir and returns its path:
// the built-in gb200-tray with the rack's fabric and the tray's place.
func trayProfile(dir string, i int) (string, error) {
	rack := rackOf(i)
	text := fmt.Sprintf(`profile: %s
fabric:
  clusterUUID: %s
  cliqueID: %d
  state: COMPLETED
  health: HEALTHY
platform:
  chassisSerial: FLEET%04d
  slotNumber: %d
  trayIndex: %d
  hostID: 1
`, profileGB200, rackUUID(rack), gb200Clique, rack, i%traysPerDomain+1, i%traysPerDomain)
	path := filepath.Join(dir, nodeName(i)+".yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return "", fmt.Errorf("profile file of tray %s: %w", nodeName(i), err)
	}
	return path, nil
}

// channelPoolObjects are the ResourceSlices of the domains' channel pools,
// n exclusive channels each, as gpudra-controller publishes them
// (slicebuilder.ChannelPools, one pool per domain, cluster-scoped with the
// domain's node selector).
func channelPoolObjects(domains []string, n int) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for _, domain := range domains {
		// PoolSlices names a pool's slices after a node and numbers them
		// from 0: one name per domain keeps them apart.
		out = append(out, fakenodes.PoolSlices(driverName, "nvlink-"+domain, *slicebuilder.ChannelPools(driverName, []string{domain}, n))...)
	}
	return out
}

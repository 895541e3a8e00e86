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
	"testing"

	"github.com/gpudra/gpudra/internal/checkpoint"
)

// TestCountDaemons: gpudra_plugin_mps_daemons counts the daemons recorded
// as running, unhealthy while the last check found them not answering;
// daemons half started or half stopped are in neither, and trouble left
// for a daemon that no longer runs does not count.
func TestCountDaemons(t *testing.T) {
	daemons := map[string]checkpoint.MPSDaemon{
		"gpu-0":              {State: checkpoint.DaemonRunning},
		"gpu-1":              {State: checkpoint.DaemonRunning},
		"gpu-2-mig-1g10gb-0": {State: checkpoint.DaemonRunning},
		"gpu-3":              {State: checkpoint.DaemonStarting},
		"gpu-4":              {State: checkpoint.DaemonStopping},
	}
	trouble := map[string]string{
		"gpu-1": "MPS control daemon not running: connection refused",
		"gpu-4": "MPS control daemon not running: connection refused",
		"gpu-7": "MPS control daemon not running: gone",
	}
	if running, unhealthy := countDaemons(daemons, trouble); running != 2 || unhealthy != 1 {
		t.Errorf("running %d, unhealthy %d; want 2 and 1", running, unhealthy)
	}
	if running, unhealthy := countDaemons(nil, trouble); running != 0 || unhealthy != 0 {
		t.Errorf("no daemons: running %d, unhealthy %d", running, unhealthy)
	}
}

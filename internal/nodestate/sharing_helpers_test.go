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

package nodestate

import "github.com/gpudra/gpudra/internal/gpu"

// noSharing is a Hardware's sharing half for the unit tests' inventories:
// compute mode and time slice are accepted and forgotten; the MPS tests
// run on the fake backend (internal/simulate).
type noSharing struct{}

func (noSharing) ComputeMode(string) (gpu.ComputeMode, error)  { return gpu.ComputeModeDefault, nil }
func (noSharing) SetComputeMode(string, gpu.ComputeMode) error { return nil }
func (noSharing) SetTimeSlice(string, int) error               { return nil }
func (noSharing) MPSDaemon(deviceUUID string) gpu.DaemonCommand {
	return gpu.DaemonCommand{Args: []string{"/bin/false"}}
}

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
	"github.com/gpudra/gpudra/internal/gpu"
	"github.com/gpudra/gpudra/internal/nodestate"
)

// countingHardware counts the MIG instances the node state creates and
// destroys, for the metrics.
type countingHardware struct {
	nodestate.Hardware
	m *Instruments
}

func (h countingHardware) CreateGPUInstance(uuid string, profileID uint32, pl gpu.MigPlacement) (int, error) {
	id, err := h.Hardware.CreateGPUInstance(uuid, profileID, pl)
	if err == nil {
		h.m.migCreated.Inc()
	}
	return id, err
}

func (h countingHardware) DestroyGPUInstance(uuid string, giID int, profileID uint32, pl gpu.MigPlacement) error {
	err := h.Hardware.DestroyGPUInstance(uuid, giID, profileID, pl)
	if err == nil {
		h.m.migDestroyed.Inc()
	}
	return err
}

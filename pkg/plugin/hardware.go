package plugin

import (
	"github.com/gpudra/gpudra/pkg/gpu"
	"github.com/gpudra/gpudra/pkg/nodestate"
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

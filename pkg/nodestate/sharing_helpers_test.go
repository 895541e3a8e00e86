package nodestate

import "github.com/gpudra/gpudra/pkg/gpu"

// noSharing is a Hardware's sharing half for the unit tests' inventories:
// compute mode and time slice are accepted and forgotten; the MPS tests
// run on the fake backend (pkg/simulate).
type noSharing struct{}

func (noSharing) ComputeMode(string) (gpu.ComputeMode, error)  { return gpu.ComputeModeDefault, nil }
func (noSharing) SetComputeMode(string, gpu.ComputeMode) error { return nil }
func (noSharing) SetTimeSlice(string, int) error               { return nil }
func (noSharing) MPSDaemon(deviceUUID string) gpu.DaemonCommand {
	return gpu.DaemonCommand{Args: []string{"/bin/false"}}
}

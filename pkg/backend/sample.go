package backend

import (
	"github.com/gpudra/gpudra/pkg/discovery"
	"github.com/gpudra/gpudra/pkg/gpu"
)

// Sample reads what a GPU or MIG device (by UUID) reports about its use.
func (l library) Sample(uuid string) (gpu.Sample, error) {
	return discovery.Sample(l.lib, uuid)
}

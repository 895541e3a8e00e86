package simulate

import (
	"os"
	"testing"

	"github.com/gpudra/gpudra/pkg/mpsstandin"
)

// TestMain lets the simulated node's MPS daemons run as this test binary
// (the fake backend starts os.Executable() as the stand-in).
func TestMain(m *testing.M) {
	mpsstandin.Dispatch()
	os.Exit(m.Run())
}

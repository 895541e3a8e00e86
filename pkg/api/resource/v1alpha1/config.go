package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Config is a decoded opaque device configuration: one of this package's
// kinds.
type Config interface {
	runtime.Object
	// Default fills in every field the user left unset. It is idempotent.
	Default()
	// Validate reports every invalid field at once, each with its path
	// relative to the parameters ("parameters.driverCapabilities[1]: ...").
	// Call it after Default.
	Validate() error
}

// parametersPath is the root of every field path in errors: the caller knows
// which claim and which config entry the parameters came from and prefixes
// that, so the user reads one message that leads to the offending value.
var parametersPath = field.NewPath("parameters")

var (
	_ Config = &GpuConfig{}
	_ Config = &MigConfig{}
)

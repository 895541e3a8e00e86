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

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpudra/gpudra/internal/errorlist"
)

// Config is a decoded opaque device configuration: one of this package's
// kinds.
type Config interface {
	runtime.Object
	// Default fills in every field the user left unset. It is idempotent.
	Default()
	// Validate reports every invalid field at once, each with its path
	// relative to the parameters ("parameters.driverCapabilities[1]: ..."),
	// summarized past errorlist.Max (see summarize). Call it after Default.
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

// summarize is how Validate methods return their field errors: the first
// errorlist.Max of them and how many there are. field.ErrorList's own
// ToAggregate formats every error and joins them all, which a config with
// thousands of bad entries turns into a message of hundreds of kilobytes.
func summarize(errs field.ErrorList) error {
	list := make([]error, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	return errorlist.Summarize(list)
}

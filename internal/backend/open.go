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

package backend

import (
	"context"
	"fmt"
	"strings"
)

// Kinds are the valid values of Options.Kind (--device-backend).
var Kinds = []string{"nvml", "fake"}

// Open opens the backend opts.Kind names and initializes NVML. The caller
// closes it.
func Open(ctx context.Context, opts Options) (*Backend, error) {
	switch opts.Kind {
	case "nvml":
		return openNVML(ctx, opts)
	case "fake":
		return openFake(ctx, opts)
	default:
		return nil, fmt.Errorf("unknown device backend %q (valid: %s)", opts.Kind, strings.Join(Kinds, ", "))
	}
}

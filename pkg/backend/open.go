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

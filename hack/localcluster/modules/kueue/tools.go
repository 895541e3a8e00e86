//go:build tools

// Package tools pins the Kueue command that hack/localcluster/build.sh
// builds, so that go.mod and go.sum list everything it needs.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)

// Checks the kind config offline with kind's own config types; its own
// module, so that the main module does not depend on kind.
module github.com/gpudra/gpudra/hack/kind

go 1.26.0

require (
	sigs.k8s.io/kind v0.33.0
	sigs.k8s.io/yaml v1.4.0
)

require github.com/pkg/errors v0.9.1 // indirect

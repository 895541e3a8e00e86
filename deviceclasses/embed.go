// Package deviceclasses embeds the DeviceClasses gpudra ships and the example
// claims and pods under examples/, so that offline tools (gpudra simulate,
// gpudra check) run on exactly what users apply.
package deviceclasses

import "embed"

// FS holds *.yaml (DeviceClasses), examples/*.yaml and the multi-node
// training examples, examples/training/*.yaml (which gpudra simulate, on
// one node, does not run).
//
//go:embed *.yaml examples/*.yaml examples/training/*.yaml
var FS embed.FS

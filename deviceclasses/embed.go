// Package deviceclasses embeds the DeviceClasses gpudra ships and the example
// claims and pods under examples/, so that offline tools (gpudra simulate,
// gpudra check) run on exactly what users apply.
package deviceclasses

import "embed"

// FS holds *.yaml (DeviceClasses) and examples/*.yaml.
//
//go:embed *.yaml examples/*.yaml
var FS embed.FS

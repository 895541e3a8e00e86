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

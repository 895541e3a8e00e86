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

// Package gpu is gpudra's device model: the GPUs of one node as plain data,
// and the grammar of the device names that gpudra publishes for them.
//
// It imports nothing of Kubernetes and nothing of NVML, so every other layer
// (the NVML backends below it, the slice builder and the node state above it)
// can agree on one description of the hardware.
package gpu
